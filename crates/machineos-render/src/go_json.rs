//! The JSON the MCO's Go code gives a rendered MachineConfig, and the name it derives from it.
//!
//! The MCO merges into Ignition's Go structs (`config/v3_5/types`) and stores the result
//! marshalled with `github.com/clarketm/json` (`MergeMachineConfigs`), a fork of
//! `encoding/json` whose `omitempty` also drops a struct whose fields are all empty; it names
//! the rendered MachineConfig `rendered-<pool>-<md5>` over a fixed salt and `yaml.Marshal` of
//! the whole `MachineConfigSpec` (`pkg/controller/render/hash.go`). The Go types decide which
//! keys exist, not the data: a field without `omitempty` is always written (`version`,
//! `path`, `name`), a pointer only when set (an explicit `"compression":""` stays), a slice
//! only when not empty, `Partition.number` and `Tang.url` (plain `omitempty` values) only
//! when not zero, and a nested struct only when something in it is set (so an empty config is
//! `{"ignition":{"version":"3.5.0"}}`). [`shape_config`] applies those rules from a table of
//! the v3_5 types (`SHAPES`, in the Go field order), so the rendered config machineos stores
//! is the one the MCO stores, key for key; keys the table does not know (none in 3.6.0, which
//! has 3.5.0's fields) are kept as they are.
//!
//! [`spec_json`] is Go's encoding of `MachineConfigSpec` (every field, no `omitempty`
//! honoured but `config`'s), [`rendered_hash`] the salted MD5 of its YAML
//! ([`machineos_goyaml`]), and [`go_json_len`] the size Go's `json.Marshal` gives a value
//! (compact, with `<`, `>`, `&`, U+2028 and U+2029 escaped) — what the MCO's size limit
//! counts. Checked against the Go libraries by the golden file
//! `tests/golden/render-name.expected.jsonl`.

use machineos_api::v1::MachineConfigSpec;
use md5::{Digest as _, Md5};
use serde_json::{Map, Value};

/// The salt of the MCO's rendered-name hash (`hash.go`: "80 random bytes … Do not change").
const SALT: [u8; 80] = [
    16, 124, 206, 228, 139, 56, 175, 175, 79, 229, 134, 118, 157, 154, 211, 110, 25, 93, 47, 253,
    172, 106, 37, 7, 174, 13, 160, 185, 110, 17, 87, 52, 219, 131, 12, 206, 218, 141, 116, 135,
    188, 181, 192, 151, 233, 62, 126, 165, 64, 83, 179, 119, 15, 168, 208, 197, 146, 107, 58, 227,
    133, 188, 238, 26, 33, 26, 235, 202, 32, 173, 31, 234, 41, 144, 148, 79, 6, 206, 23, 22,
];

/// How Go's encoder writes one field of a v3_5 struct.
#[derive(Debug, Clone, Copy)]
enum Kind {
    /// A value without `omitempty`: always written, `""` when unset.
    Required,
    /// A pointer (`*string`, `*int`, `*bool`): written when set, whatever its value.
    Pointer,
    /// A plain value with `omitempty`: written when not zero.
    NonZero,
    /// A slice of scalars: written when not empty.
    Scalars,
    /// A nested struct with `omitempty`: written when one of its fields is set, shaped by
    /// its own table.
    Struct(&'static [(&'static str, Kind)]),
    /// A nested struct without `omitempty` (`Config.ignition`): always written.
    StructAlways(&'static [(&'static str, Kind)]),
    /// A slice of structs: written when not empty, each element shaped.
    Structs(&'static [(&'static str, Kind)]),
}

use Kind::{NonZero, Pointer, Required, Scalars, Struct, StructAlways, Structs};

const VERIFICATION: &[(&str, Kind)] = &[("hash", Pointer)];
const HTTP_HEADER: &[(&str, Kind)] = &[("name", Required), ("value", Pointer)];
const RESOURCE: &[(&str, Kind)] = &[
    ("compression", Pointer),
    ("httpHeaders", Structs(HTTP_HEADER)),
    ("source", Pointer),
    ("verification", Struct(VERIFICATION)),
];
const IGNITION_CONFIG: &[(&str, Kind)] =
    &[("merge", Structs(RESOURCE)), ("replace", Struct(RESOURCE))];
const PROXY: &[(&str, Kind)] = &[
    ("httpProxy", Pointer),
    ("httpsProxy", Pointer),
    ("noProxy", Scalars),
];
const TLS: &[(&str, Kind)] = &[("certificateAuthorities", Structs(RESOURCE))];
const SECURITY: &[(&str, Kind)] = &[("tls", Struct(TLS))];
const TIMEOUTS: &[(&str, Kind)] = &[("httpResponseHeaders", Pointer), ("httpTotal", Pointer)];
const IGNITION: &[(&str, Kind)] = &[
    ("config", Struct(IGNITION_CONFIG)),
    ("proxy", Struct(PROXY)),
    ("security", Struct(SECURITY)),
    ("timeouts", Struct(TIMEOUTS)),
    ("version", Required),
];
const KERNEL_ARGUMENTS: &[(&str, Kind)] = &[("shouldExist", Scalars), ("shouldNotExist", Scalars)];
const PASSWD_GROUP: &[(&str, Kind)] = &[
    ("gid", Pointer),
    ("name", Required),
    ("passwordHash", Pointer),
    ("shouldExist", Pointer),
    ("system", Pointer),
];
const PASSWD_USER: &[(&str, Kind)] = &[
    ("gecos", Pointer),
    ("groups", Scalars),
    ("homeDir", Pointer),
    ("name", Required),
    ("noCreateHome", Pointer),
    ("noLogInit", Pointer),
    ("noUserGroup", Pointer),
    ("passwordHash", Pointer),
    ("primaryGroup", Pointer),
    ("sshAuthorizedKeys", Scalars),
    ("shell", Pointer),
    ("shouldExist", Pointer),
    ("system", Pointer),
    ("uid", Pointer),
];
const PASSWD: &[(&str, Kind)] = &[
    ("groups", Structs(PASSWD_GROUP)),
    ("users", Structs(PASSWD_USER)),
];
const NODE_OWNER: &[(&str, Kind)] = &[("id", Pointer), ("name", Pointer)];
const DIRECTORY: &[(&str, Kind)] = &[
    ("group", Struct(NODE_OWNER)),
    ("overwrite", Pointer),
    ("path", Required),
    ("user", Struct(NODE_OWNER)),
    ("mode", Pointer),
];
const FILE: &[(&str, Kind)] = &[
    ("group", Struct(NODE_OWNER)),
    ("overwrite", Pointer),
    ("path", Required),
    ("user", Struct(NODE_OWNER)),
    ("append", Structs(RESOURCE)),
    ("contents", Struct(RESOURCE)),
    ("mode", Pointer),
];
const LINK: &[(&str, Kind)] = &[
    ("group", Struct(NODE_OWNER)),
    ("overwrite", Pointer),
    ("path", Required),
    ("user", Struct(NODE_OWNER)),
    ("hard", Pointer),
    ("target", Pointer),
];
const PARTITION: &[(&str, Kind)] = &[
    ("guid", Pointer),
    ("label", Pointer),
    ("number", NonZero),
    ("resize", Pointer),
    ("shouldExist", Pointer),
    ("sizeMiB", Pointer),
    ("startMiB", Pointer),
    ("typeGuid", Pointer),
    ("wipePartitionEntry", Pointer),
];
const DISK: &[(&str, Kind)] = &[
    ("device", Required),
    ("partitions", Structs(PARTITION)),
    ("wipeTable", Pointer),
];
const FILESYSTEM: &[(&str, Kind)] = &[
    ("device", Required),
    ("format", Pointer),
    ("label", Pointer),
    ("mountOptions", Scalars),
    ("options", Scalars),
    ("path", Pointer),
    ("uuid", Pointer),
    ("wipeFilesystem", Pointer),
];
const CEX: &[(&str, Kind)] = &[("enabled", Pointer)];
const CLEVIS_CUSTOM: &[(&str, Kind)] = &[
    ("config", Pointer),
    ("needsNetwork", Pointer),
    ("pin", Pointer),
];
const TANG: &[(&str, Kind)] = &[
    ("advertisement", Pointer),
    ("thumbprint", Pointer),
    ("url", NonZero),
];
const CLEVIS: &[(&str, Kind)] = &[
    ("custom", Struct(CLEVIS_CUSTOM)),
    ("tang", Structs(TANG)),
    ("threshold", Pointer),
    ("tpm2", Pointer),
];
const LUKS: &[(&str, Kind)] = &[
    ("cex", Struct(CEX)),
    ("clevis", Struct(CLEVIS)),
    ("device", Pointer),
    ("discard", Pointer),
    ("keyFile", Struct(RESOURCE)),
    ("label", Pointer),
    ("name", Required),
    ("openOptions", Scalars),
    ("options", Scalars),
    ("uuid", Pointer),
    ("wipeVolume", Pointer),
];
const RAID: &[(&str, Kind)] = &[
    ("devices", Scalars),
    ("level", Pointer),
    ("name", Required),
    ("options", Scalars),
    ("spares", Pointer),
];
const STORAGE: &[(&str, Kind)] = &[
    ("directories", Structs(DIRECTORY)),
    ("disks", Structs(DISK)),
    ("files", Structs(FILE)),
    ("filesystems", Structs(FILESYSTEM)),
    ("links", Structs(LINK)),
    ("luks", Structs(LUKS)),
    ("raid", Structs(RAID)),
];
const DROPIN: &[(&str, Kind)] = &[("contents", Pointer), ("name", Required)];
const UNIT: &[(&str, Kind)] = &[
    ("contents", Pointer),
    ("dropins", Structs(DROPIN)),
    ("enabled", Pointer),
    ("mask", Pointer),
    ("name", Required),
];
const SYSTEMD: &[(&str, Kind)] = &[("units", Structs(UNIT))];
/// `types.Config` of Ignition's `config/v3_5/types/schema.go`, field for field.
const SHAPES: &[(&str, Kind)] = &[
    ("ignition", StructAlways(IGNITION)),
    ("kernelArguments", Struct(KERNEL_ARGUMENTS)),
    ("passwd", Struct(PASSWD)),
    ("storage", Struct(STORAGE)),
    ("systemd", Struct(SYSTEMD)),
];

/// An Ignition config (JSON of machineos's model) as Go's v3_5 types encode it.
pub fn shape_config(config: &Map<String, Value>) -> Map<String, Value> {
    shape_struct(config, SHAPES)
}

fn shape_struct(value: &Map<String, Value>, table: &[(&str, Kind)]) -> Map<String, Value> {
    let mut out = Map::new();
    let empty = Map::new();
    for &(key, kind) in table {
        let v = value.get(key).filter(|v| !v.is_null());
        match kind {
            Required => {
                out.insert(
                    key.to_owned(),
                    v.cloned().unwrap_or(Value::String(String::new())),
                );
            }
            Pointer => {
                if let Some(v) = v {
                    out.insert(key.to_owned(), v.clone());
                }
            }
            NonZero => {
                if let Some(v) = v.filter(|v| !is_zero(v)) {
                    out.insert(key.to_owned(), v.clone());
                }
            }
            Scalars => {
                if let Some(v) = v.filter(|v| v.as_array().is_none_or(|a| !a.is_empty())) {
                    out.insert(key.to_owned(), v.clone());
                }
            }
            Struct(inner) | StructAlways(inner) => {
                let map = v.and_then(Value::as_object).unwrap_or(&empty);
                let shaped = shape_struct(map, inner);
                if matches!(kind, StructAlways(_)) || !is_empty_struct(&shaped, inner) {
                    out.insert(key.to_owned(), Value::Object(shaped));
                }
            }
            Structs(inner) => {
                if let Some(items) = v.and_then(Value::as_array).filter(|a| !a.is_empty()) {
                    let shaped = items
                        .iter()
                        .map(|item| match item.as_object() {
                            Some(map) => Value::Object(shape_struct(map, inner)),
                            None => item.clone(),
                        })
                        .collect();
                    out.insert(key.to_owned(), Value::Array(shaped));
                }
            }
        }
    }
    // Keys of later spec versions, which the v3_5 table does not name, as they are.
    for (key, v) in value {
        if !table.iter().any(|(k, _)| k == key) && !v.is_null() {
            out.insert(key.clone(), v.clone());
        }
    }
    out
}

/// clarketm/json's `isEmptyValue` for a struct, on its shaped form: every field empty. What
/// the shaping kept is set, except a field without `omitempty` holding its zero value.
fn is_empty_struct(shaped: &Map<String, Value>, table: &[(&str, Kind)]) -> bool {
    shaped.iter().all(|(key, v)| {
        table
            .iter()
            .any(|(k, kind)| k == key && matches!(kind, Required) && is_zero(v))
    })
}

fn is_zero(v: &Value) -> bool {
    match v {
        Value::Number(n) => n.as_f64() == Some(0.0),
        Value::String(s) => s.is_empty(),
        Value::Bool(b) => !b,
        _ => false,
    }
}

/// `json.Marshal` of openshift/api's `MachineConfigSpec`: every field (none is `omitempty`
/// but `config`, a `RawExtension` written as `null` when absent), in the Go field order.
pub fn spec_json(spec: &MachineConfigSpec) -> Value {
    let strings = |v: &[String]| Value::Array(v.iter().cloned().map(Value::String).collect());
    let mut out = Map::new();
    out.insert("osImageURL".into(), spec.os_image_url.clone().into());
    out.insert(
        "baseOSExtensionsContainerImage".into(),
        spec.base_os_extensions_container_image.clone().into(),
    );
    out.insert(
        "config".into(),
        spec.config.clone().map_or(Value::Null, Value::Object),
    );
    out.insert("kernelArguments".into(), strings(&spec.kernel_arguments));
    out.insert("extensions".into(), strings(&spec.extensions));
    out.insert("fips".into(), spec.fips.into());
    out.insert("kernelType".into(), spec.kernel_type.clone().into());
    Value::Object(out)
}

/// The MCO's rendered-name hash of a spec: MD5 over the salt and the YAML of
/// [`spec_json`], as 32 hex digits.
pub fn rendered_hash(spec: &MachineConfigSpec) -> Result<String, machineos_goyaml::GoYamlError> {
    let yaml = machineos_goyaml::to_yaml(&spec_json(spec))?;
    let mut md5 = Md5::new();
    md5.update(SALT);
    md5.update(yaml.as_bytes());
    Ok(hex::encode(md5.finalize()))
}

/// The length of Go's `json.Marshal` output for `value`: compact, strings with `"`, `\`,
/// control characters, `<`, `>`, `&`, U+2028 and U+2029 escaped (the rest as UTF-8).
pub fn go_json_len(value: &Value) -> usize {
    match value {
        Value::Null => 4,
        Value::Bool(b) => {
            if *b {
                4
            } else {
                5
            }
        }
        Value::Number(n) => n.to_string().len(),
        Value::String(s) => go_string_len(s),
        Value::Array(items) => {
            2 + items.iter().map(go_json_len).sum::<usize>() + items.len().saturating_sub(1)
        }
        Value::Object(map) => {
            2 + map
                .iter()
                .map(|(k, v)| go_string_len(k) + 1 + go_json_len(v))
                .sum::<usize>()
                + map.len().saturating_sub(1)
        }
    }
}

fn go_string_len(s: &str) -> usize {
    2 + s
        .chars()
        .map(|c| match c {
            '"' | '\\' | '\n' | '\r' | '\t' => 2,
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => 6,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        })
        .sum::<usize>()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn go_writes_set_fields_only() {
        let config = json!({
            "ignition": {"version": "3.5.0"},
            "storage": {"files": [{"path": "/a", "contents": {"compression": ""}, "mode": 420}],
                        "disks": [{"device": "/dev/vda", "partitions": [{"number": 0, "label": "x"}]}]},
            "systemd": {"units": [{"name": "a.service", "enabled": false, "dropins": []}]},
            "futureKey": {"x": 1}
        });
        let shaped = shape_config(config.as_object().expect("object"));
        assert_eq!(
            Value::Object(shaped),
            json!({
                "ignition": {"version": "3.5.0"},
                "storage": {
                    "disks": [{"device": "/dev/vda", "partitions": [{"label": "x"}]}],
                    "files": [{"path": "/a", "contents": {"compression": ""}, "mode": 420}]
                },
                "systemd": {"units": [{"enabled": false, "name": "a.service"}]},
                "futureKey": {"x": 1}
            })
        );
        // An empty config is the MCO's well-known one.
        let empty = json!({"ignition": {"version": "3.5.0", "config": {"replace": {}}}, "passwd": {"users": []}});
        assert_eq!(
            Value::Object(shape_config(empty.as_object().expect("object"))),
            json!({"ignition": {"version": "3.5.0"}})
        );
    }

    #[test]
    fn go_json_length_counts_html_escapes() {
        for (value, go) in [
            (json!({"a": "x<y&z"}), r#"{"a":"x\u003cy\u0026z"}"#),
            (
                json!(["é", "\n", "\u{1}", null, true, 12]),
                r#"["é","\n","\u0001",null,true,12]"#,
            ),
            (json!({}), "{}"),
        ] {
            assert_eq!(go_json_len(&value), go.len(), "{value}");
        }
    }
}
