//! Image config blobs (the JSON a manifest's `config` descriptor points at): patching a base
//! image's config for one added layer without disturbing fields machineos does not model, and a
//! small typed view for reading what machineos needs.

use std::collections::BTreeMap;

use machineos_diagnostics::{Classify, Retry};
use serde::Deserialize;
use serde::de::IgnoredAny;
use serde_json::{Map, Value};

use crate::digest::Digest;
use crate::manifest::json_path;

/// Why an image config could not be parsed or patched.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The blob is not JSON of the expected shape.
    #[error("{op} image config: at {path}: {error}")]
    Json {
        /// `parsing` or `patching`.
        op: &'static str,
        /// JSON path of the problem.
        path: String,
        /// The underlying error.
        error: serde_json::Error,
    },
    /// A field the patch needs is missing or of the wrong type.
    #[error("patching image config: {path}: {problem}")]
    Shape {
        /// JSON path in the base config.
        path: &'static str,
        /// What is wrong there.
        problem: &'static str,
    },
}

impl Classify for ConfigError {
    /// Always `InvalidImageConfig`: the base image's config must change.
    fn reason(&self) -> &'static str {
        "InvalidImageConfig"
    }

    fn retry(&self) -> Retry {
        Retry::Permanent
    }
}

/// What to change in a base image config when adding one layer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigPatch {
    /// The uncompressed digest of the added layer, appended to `rootfs.diff_ids`.
    pub diff_id: Digest,
    /// Labels merged into `config.Labels`; these win over the base's labels of the same name.
    pub labels: BTreeMap<String, String>,
    /// The image creation time, RFC 3339 (see [`rfc3339_from_unix`]); sets the top-level
    /// `created` and the new history entry's `created` when given.
    pub created: Option<String>,
    /// The new history entry's `created_by`.
    pub history_created_by: String,
    /// The new history entry's `comment`, if any.
    pub history_comment: Option<String>,
}

fn shape(path: &'static str, problem: &'static str) -> ConfigError {
    ConfigError::Shape { path, problem }
}

/// Get `obj[key]` as an object, creating it when absent or `null`.
fn object_entry<'a>(
    obj: &'a mut Map<String, Value>,
    key: &str,
    path: &'static str,
) -> Result<&'a mut Map<String, Value>, ConfigError> {
    let slot = obj.entry(key.to_owned()).or_insert(Value::Null);
    if slot.is_null() {
        *slot = Value::Object(Map::new());
    }
    slot.as_object_mut()
        .ok_or_else(|| shape(path, "not an object"))
}

/// Apply `patch` to the base image config `base`: append the layer's diff ID to
/// `rootfs.diff_ids` (which must exist), append a `history` entry, merge the labels into
/// `config.Labels` (keeping the base's other labels such as `containers.bootc`), and set
/// `created` when given. Unknown fields and field order are kept; the output is compact JSON
/// and deterministic for the same inputs.
pub fn patch_config(base: &[u8], patch: &ConfigPatch) -> Result<Vec<u8>, ConfigError> {
    let mut root: Value = serde_json::from_slice(base).map_err(|error| ConfigError::Json {
        op: "patching",
        path: "$".to_owned(),
        error,
    })?;
    let obj = root
        .as_object_mut()
        .ok_or_else(|| shape("$", "not a JSON object"))?;

    let rootfs = obj
        .get_mut("rootfs")
        .ok_or_else(|| shape("$.rootfs", "missing"))?
        .as_object_mut()
        .ok_or_else(|| shape("$.rootfs", "not an object"))?;
    rootfs
        .get_mut("diff_ids")
        .ok_or_else(|| shape("$.rootfs.diff_ids", "missing"))?
        .as_array_mut()
        .ok_or_else(|| shape("$.rootfs.diff_ids", "not an array"))?
        .push(Value::String(patch.diff_id.to_string()));

    let mut entry = Map::new();
    if let Some(created) = &patch.created {
        entry.insert("created".to_owned(), Value::String(created.clone()));
    }
    entry.insert(
        "created_by".to_owned(),
        Value::String(patch.history_created_by.clone()),
    );
    if let Some(comment) = &patch.history_comment {
        entry.insert("comment".to_owned(), Value::String(comment.clone()));
    }
    let history = obj.entry("history").or_insert(Value::Null);
    if history.is_null() {
        *history = Value::Array(Vec::new());
    }
    history
        .as_array_mut()
        .ok_or_else(|| shape("$.history", "not an array"))?
        .push(Value::Object(entry));

    if !patch.labels.is_empty() {
        let config = object_entry(obj, "config", "$.config")?;
        let labels = object_entry(config, "Labels", "$.config.Labels")?;
        for (k, v) in &patch.labels {
            labels.insert(k.clone(), Value::String(v.clone()));
        }
    }

    if let Some(created) = &patch.created {
        obj.insert("created".to_owned(), Value::String(created.clone()));
    }

    serde_json::to_vec(&root).map_err(|error| ConfigError::Json {
        op: "patching",
        path: "$".to_owned(),
        error,
    })
}

#[derive(Deserialize)]
struct RawConfig {
    os: String,
    architecture: String,
    #[serde(default)]
    variant: Option<String>,
    #[serde(default)]
    config: Option<RawRuntime>,
    rootfs: RawRootfs,
    #[serde(default)]
    history: Option<Vec<IgnoredAny>>,
}

#[derive(Deserialize)]
struct RawRuntime {
    #[serde(default, rename = "Labels")]
    labels: Option<BTreeMap<String, String>>,
}

#[derive(Deserialize)]
struct RawRootfs {
    diff_ids: Vec<Digest>,
}

/// The parts of an image config machineos reads.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ImageConfigView {
    /// `os`.
    pub os: String,
    /// `architecture`.
    pub architecture: String,
    /// `variant`, if any.
    pub variant: Option<String>,
    /// `config.Labels` (empty when absent or null).
    pub labels: BTreeMap<String, String>,
    /// `rootfs.diff_ids`, base layer first.
    pub diff_ids: Vec<Digest>,
    /// How many `history` entries there are.
    pub history_len: usize,
}

/// Parse an image config blob into an [`ImageConfigView`].
pub fn parse_config(bytes: &[u8]) -> Result<ImageConfigView, ConfigError> {
    let de = &mut serde_json::Deserializer::from_slice(bytes);
    let raw: RawConfig = serde_path_to_error::deserialize(de).map_err(|e| ConfigError::Json {
        op: "parsing",
        path: json_path(e.path()),
        error: e.into_inner(),
    })?;
    Ok(ImageConfigView {
        os: raw.os,
        architecture: raw.architecture,
        variant: raw.variant,
        labels: raw.config.and_then(|c| c.labels).unwrap_or_default(),
        diff_ids: raw.rootfs.diff_ids,
        history_len: raw.history.map_or(0, |h| h.len()),
    })
}

/// Days since 1970-01-01 to a proleptic Gregorian (year, month, day). Works in 400-year eras
/// of 146097 days, starting each year on March 1st so the leap day is the era-year's last day.
fn civil_from_days(days: i64) -> (i64, u32, u32) {
    let z = days + 719_468; // days since 0000-03-01
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097); // day of era, 0..=146096
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365; // year of era, 0..=399
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100); // day of (March-based) year, 0..=365
    let mp = (5 * doy + 2) / 153; // March-based month, 0..=11
    let day = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let month = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Format Unix time `secs` as RFC 3339 in UTC, `YYYY-MM-DDTHH:MM:SSZ`. Years before 0 or after
/// 9999 are not representable in RFC 3339 and are printed with a sign or extra digits.
pub fn rfc3339_from_unix(secs: i64) -> String {
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        sod / 3600,
        sod % 3600 / 60,
        sod % 60
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339_table() {
        let cases = [
            (0, "1970-01-01T00:00:00Z"),
            (-1, "1969-12-31T23:59:59Z"),
            (86_399, "1970-01-01T23:59:59Z"),
            (951_782_400, "2000-02-29T00:00:00Z"),
            (951_868_800, "2000-03-01T00:00:00Z"),
            (1_234_567_890, "2009-02-13T23:31:30Z"),
            (1_709_164_800, "2024-02-29T00:00:00Z"),
            (1_735_689_599, "2024-12-31T23:59:59Z"),
            (4_102_444_800, "2100-01-01T00:00:00Z"),
            (4_107_542_400, "2100-03-01T00:00:00Z"),
            (-2_208_988_800, "1900-01-01T00:00:00Z"),
            (-62_135_596_800, "0001-01-01T00:00:00Z"),
            (253_402_300_799, "9999-12-31T23:59:59Z"),
        ];
        for (secs, want) in cases {
            assert_eq!(rfc3339_from_unix(secs), want, "{secs}");
        }
    }

    fn base() -> String {
        format!(
            r#"{{"architecture":"amd64","os":"linux","config":{{"Env":["A=1"],"Labels":{{"containers.bootc":"1","ostree.bootable":"true","version":"old"}}}},"rootfs":{{"type":"layers","diff_ids":["{}"]}},"history":[{{"created_by":"base"}}],"x-extra":1}}"#,
            Digest::from_sha256_bytes([1; 32])
        )
    }

    fn patch() -> ConfigPatch {
        ConfigPatch {
            diff_id: Digest::from_sha256_bytes([2; 32]),
            labels: BTreeMap::from([
                ("version".to_owned(), "new".to_owned()),
                ("machineos.io/pool".to_owned(), "worker".to_owned()),
            ]),
            created: Some("2024-02-29T00:00:00Z".to_owned()),
            history_created_by: "machineos build".to_owned(),
            history_comment: Some("rendered-worker-abc".to_owned()),
        }
    }

    #[test]
    fn patch_and_view() {
        let out = patch_config(base().as_bytes(), &patch()).unwrap();
        assert_eq!(out, patch_config(base().as_bytes(), &patch()).unwrap());
        let text = String::from_utf8(out.clone()).unwrap();
        assert!(text.starts_with(r#"{"architecture":"amd64","os":"linux","config":{"Env":["A=1"],"Labels":{"containers.bootc":"1","#), "{text}");
        assert!(text.contains(r#""x-extra":1"#));
        assert!(
            text.ends_with(r#","created":"2024-02-29T00:00:00Z"}"#),
            "{text}"
        );
        assert!(text.contains(r#"{"created":"2024-02-29T00:00:00Z","created_by":"machineos build","comment":"rendered-worker-abc"}"#), "{text}");

        let view = parse_config(&out).unwrap();
        assert_eq!(view.os, "linux");
        assert_eq!(view.architecture, "amd64");
        assert_eq!(view.variant, None);
        assert_eq!(view.history_len, 2);
        assert_eq!(
            view.diff_ids,
            vec![
                Digest::from_sha256_bytes([1; 32]),
                Digest::from_sha256_bytes([2; 32])
            ]
        );
        let labels: Vec<(&str, &str)> = view
            .labels
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(
            labels,
            [
                ("containers.bootc", "1"),
                ("machineos.io/pool", "worker"),
                ("ostree.bootable", "true"),
                ("version", "new"),
            ]
        );
    }

    #[test]
    fn patch_creates_missing_parts() {
        let d = Digest::from_sha256_bytes([1; 32]);
        let cases = [
            format!(r#"{{"rootfs":{{"diff_ids":["{d}"]}}}}"#),
            format!(r#"{{"config":null,"history":null,"rootfs":{{"diff_ids":["{d}"]}}}}"#),
            format!(r#"{{"config":{{"Labels":null}},"rootfs":{{"diff_ids":["{d}"]}}}}"#),
        ];
        for base in cases {
            let mut p = patch();
            p.created = None;
            p.history_comment = None;
            let v: Value =
                serde_json::from_slice(&patch_config(base.as_bytes(), &p).unwrap()).unwrap();
            assert_eq!(v["config"]["Labels"]["version"], "new", "{base}");
            assert_eq!(
                v["history"][0],
                serde_json::json!({"created_by": "machineos build"})
            );
            assert_eq!(v.get("created"), None);
            assert_eq!(v["rootfs"]["diff_ids"].as_array().unwrap().len(), 2);
        }
    }

    #[test]
    fn patch_errors_table() {
        let cases = [
            ("[]", "$: not a JSON object"),
            ("{", "patching image config: at $"),
            ("{}", "$.rootfs: missing"),
            (r#"{"rootfs":[]}"#, "$.rootfs: not an object"),
            (r#"{"rootfs":{}}"#, "$.rootfs.diff_ids: missing"),
            (
                r#"{"rootfs":{"diff_ids":{}}}"#,
                "$.rootfs.diff_ids: not an array",
            ),
            (
                r#"{"rootfs":{"diff_ids":[]},"history":{}}"#,
                "$.history: not an array",
            ),
            (
                r#"{"rootfs":{"diff_ids":[]},"config":"x"}"#,
                "$.config: not an object",
            ),
            (
                r#"{"rootfs":{"diff_ids":[]},"config":{"Labels":[]}}"#,
                "$.config.Labels: not an object",
            ),
        ];
        for (base, needle) in cases {
            let msg = patch_config(base.as_bytes(), &patch())
                .unwrap_err()
                .to_string();
            assert!(msg.contains(needle), "{base}: {msg}");
        }
    }

    #[test]
    fn parse_errors_table() {
        let cases = [
            (
                r#"{"os":"linux","rootfs":{"diff_ids":[]}}"#,
                "missing field `architecture`",
            ),
            (
                r#"{"os":"linux","architecture":"amd64","rootfs":{"diff_ids":["sha256:1"]}}"#,
                "$.rootfs.diff_ids[0]",
            ),
            (
                r#"{"os":"linux","architecture":"amd64","config":{"Labels":{"a":1}},"rootfs":{"diff_ids":[]}}"#,
                "$.config.Labels.a",
            ),
        ];
        for (body, needle) in cases {
            let msg = parse_config(body.as_bytes()).unwrap_err().to_string();
            assert!(msg.contains(needle), "{body}: {msg}");
        }
        let v = parse_config(
            br#"{"os":"linux","architecture":"arm64","variant":"v8","config":{"Labels":null},"rootfs":{"type":"layers","diff_ids":[]}}"#,
        )
        .unwrap();
        assert_eq!(v.variant.as_deref(), Some("v8"));
        assert!(v.labels.is_empty());
        assert_eq!(v.history_len, 0);
    }
}
