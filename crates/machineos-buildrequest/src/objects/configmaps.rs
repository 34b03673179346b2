//! The per-build ConfigMaps: the Containerfile, and the rendered MachineConfig (split across
//! several when it does not fit in one), and the inverse of the split.
//!
//! Contract:
//!
//! * `containerfile-<build>`: key `Containerfile` = the rendered Containerfile (the
//!   OpenShift Build's); for the build Job, the MachineOSConfig's Containerfile and the
//!   registry CA bundle ([`build_inputs_config_map`]).
//! * The MachineConfig is encoded as the MCO does: standard base64 (with padding, no line
//!   breaks) of the gzip of the JSON bytes given.
//! * **Size bound.** The API server refuses a ConfigMap whose data keys plus values exceed
//!   1 MiB (1 048 576 bytes; metadata does not count there, but does count against etcd's
//!   1.5 MiB request limit). We put at most [`McLimits::chunk_bytes`] = 1 000 000 bytes of
//!   encoded value in one ConfigMap: with its key (≤ 31 bytes) that is ≥ 48 000 bytes under
//!   the limit, which leaves room for metadata.
//! * **One ConfigMap** `mc-<build>`, key [`MC_KEY`] = the whole encoding, when it fits (the
//!   MCO's layout, unchanged).
//! * **Split** otherwise: `mc-<build>-0` … `mc-<build>-<N-1>`, ConfigMap `i` with the single
//!   key `machineconfig.json.gz.part<i>` holding bytes `[i·chunk, (i+1)·chunk)` of the
//!   encoding, and the annotations [`MC_PARTS_ANNOTATION`] = `N` and [`MC_PART_ANNOTATION`]
//!   = `i`. **Reassembly:** concatenate the parts' values in order of `i` (0 first), then
//!   base64-decode, then gunzip ([`reassemble`]; the build pod's script does the first step
//!   and the Containerfile's extract stage the other two).
//! * More than [`McLimits::max_parts`] (8) parts are refused with [`McError::TooLarge`]
//!   naming the build, the encoded size and the limit; nothing is ever truncated.

use std::io::{Read, Write};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use flate2::Compression;
use flate2::read::GzDecoder;
use flate2::write::GzEncoder;
use serde_json::{Value, json};

use super::names::{
    BuildMeta, containerfile_config_map_name, machine_config_config_map_name,
    machine_config_part_name, object_meta,
};

/// The Containerfile ConfigMap's key.
pub const CONTAINERFILE_KEY: &str = "Containerfile";
/// The build Job's inputs ConfigMap's key for the registry CA bundle (PEM).
pub const CA_BUNDLE_KEY: &str = "registry-ca.pem";
/// The MachineConfig ConfigMap's key (the whole encoding, when not split).
pub const MC_KEY: &str = "machineconfig.json.gz";
/// machineos' annotation on every part of a split MachineConfig: how many parts there are.
pub const MC_PARTS_ANNOTATION: &str = "machineos.io/machine-config-parts";
/// machineos' annotation on every part of a split MachineConfig: its index, from 0.
pub const MC_PART_ANNOTATION: &str = "machineos.io/machine-config-part";

/// The key of part `index` of a split MachineConfig: `machineconfig.json.gz.part<index>`.
pub fn mc_part_key(index: usize) -> String {
    format!("{MC_KEY}.part{index}")
}

/// How a MachineConfig is split across ConfigMaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct McLimits {
    /// Most bytes of encoded value in one ConfigMap.
    pub chunk_bytes: usize,
    /// Most ConfigMaps (parts) for one MachineConfig.
    pub max_parts: usize,
}

impl Default for McLimits {
    fn default() -> Self {
        Self {
            chunk_bytes: 1_000_000,
            max_parts: 8,
        }
    }
}

/// Why the MachineConfig ConfigMaps could not be built.
#[derive(Debug, thiserror::Error)]
pub enum McError {
    /// The encoded MachineConfig needs more than the allowed number of ConfigMaps.
    #[error(
        "the rendered MachineConfig of build {build} is {bytes} bytes gzipped and base64-encoded, \
         more than the {limit} bytes that fit in the allowed ConfigMaps; reduce the files in the \
         MachineConfigs of its pool"
    )]
    TooLarge {
        /// The MachineOSBuild.
        build: String,
        /// The encoded size.
        bytes: usize,
        /// The largest encoded size accepted (`chunk_bytes × max_parts`).
        limit: usize,
    },
    /// Compressing failed (an I/O error of the in-memory encoder).
    #[error("compressing the rendered MachineConfig of build {build}: {source}")]
    Compress {
        /// The MachineOSBuild.
        build: String,
        /// The encoder's error.
        source: std::io::Error,
    },
}

impl machineos_diagnostics::Classify for McError {
    fn reason(&self) -> &'static str {
        match self {
            McError::TooLarge { .. } => "RenderedConfigTooLarge",
            McError::Compress { .. } => "CompressFailed",
        }
    }
    fn retry(&self) -> machineos_diagnostics::Retry {
        match self {
            McError::TooLarge { .. } => machineos_diagnostics::Retry::Permanent,
            McError::Compress { source, .. } => machineos_diagnostics::io_retry(source),
        }
    }
}

/// Why [`reassemble`] could not give back the MachineConfig.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ReassembleError {
    /// No ConfigMap was given.
    #[error("no MachineConfig ConfigMap given")]
    Empty,
    /// A ConfigMap has neither the whole key nor a part key, or an unreadable annotation.
    #[error("ConfigMap {name}: {problem}")]
    Malformed {
        /// The ConfigMap.
        name: String,
        /// What is wrong.
        problem: String,
    },
    /// The parts do not form `0..N` exactly once each.
    #[error("the MachineConfig parts are incomplete: {0}")]
    Parts(String),
    /// The concatenation is not valid base64.
    #[error("the MachineConfig is not valid base64: {0}")]
    Base64(String),
    /// The decoded bytes are not valid gzip.
    #[error("the MachineConfig is not valid gzip: {0}")]
    Gzip(String),
}

/// The Containerfile ConfigMap `containerfile-<build>` in `namespace`.
pub fn containerfile_config_map(meta: &BuildMeta, namespace: &str, containerfile: &str) -> Value {
    let name = containerfile_config_map_name(&meta.build);
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(meta, &name, namespace, false),
        "data": { CONTAINERFILE_KEY: containerfile },
    })
}

/// The build Job's inputs ConfigMap, under the same name `containerfile-<build>`: the
/// MachineOSConfig's Containerfile for the target architecture under [`CONTAINERFILE_KEY`]
/// (none: the key is absent), and the CA certificates (PEM) the controller trusts for
/// registries under [`CA_BUNDLE_KEY`] (none: absent). The build pod runs `machineos build`,
/// which renders the Containerfile template itself, so this holds the user's file as it is.
pub fn build_inputs_config_map(
    meta: &BuildMeta,
    namespace: &str,
    containerfile: Option<&str>,
    ca_bundle: Option<&str>,
) -> Value {
    let name = containerfile_config_map_name(&meta.build);
    let mut data = serde_json::Map::new();
    if let Some(c) = containerfile {
        data.insert(CONTAINERFILE_KEY.to_owned(), json!(c));
    }
    if let Some(ca) = ca_bundle {
        data.insert(CA_BUNDLE_KEY.to_owned(), json!(ca));
    }
    json!({
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": object_meta(meta, &name, namespace, false),
        "data": data,
    })
}

/// The MachineConfig ConfigMap(s) of the build, with the default [`McLimits`].
pub fn machine_config_config_maps(
    meta: &BuildMeta,
    namespace: &str,
    rendered_mc_json: &[u8],
) -> Result<Vec<Value>, McError> {
    machine_config_config_maps_with(meta, namespace, rendered_mc_json, McLimits::default())
}

/// The MachineConfig ConfigMap(s) of the build: one `mc-<build>` when the encoding fits in
/// `limits.chunk_bytes`, else `mc-<build>-0..N` (see the module documentation).
pub fn machine_config_config_maps_with(
    meta: &BuildMeta,
    namespace: &str,
    rendered_mc_json: &[u8],
    limits: McLimits,
) -> Result<Vec<Value>, McError> {
    let encoded = encode(rendered_mc_json).map_err(|source| McError::Compress {
        build: meta.build.clone(),
        source,
    })?;
    let chunk = limits.chunk_bytes.max(1);
    let limit = chunk.saturating_mul(limits.max_parts);
    if encoded.len() > limit {
        return Err(McError::TooLarge {
            build: meta.build.clone(),
            bytes: encoded.len(),
            limit,
        });
    }
    if encoded.len() <= chunk {
        let name = machine_config_config_map_name(&meta.build);
        return Ok(vec![json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": object_meta(meta, &name, namespace, false),
            "data": { MC_KEY: encoded },
        })]);
    }
    // Base64 is ASCII, so every byte offset is a character boundary.
    let parts: Vec<&str> = encoded
        .as_bytes()
        .chunks(chunk)
        .map(|c| std::str::from_utf8(c).unwrap_or_default())
        .collect();
    let count = parts.len();
    Ok(parts
        .into_iter()
        .enumerate()
        .map(|(i, part)| {
            let name = machine_config_part_name(&meta.build, i);
            let mut metadata = object_meta(meta, &name, namespace, false);
            if let Some(annotations) = metadata["annotations"].as_object_mut() {
                annotations.insert(MC_PARTS_ANNOTATION.into(), json!(count.to_string()));
                annotations.insert(MC_PART_ANNOTATION.into(), json!(i.to_string()));
            }
            let mut data = serde_json::Map::new();
            data.insert(mc_part_key(i), json!(part));
            json!({
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": metadata,
                "data": data,
            })
        })
        .collect())
}

/// The base64 of the gzip of `json`, as in the `mc-<build>` ConfigMap.
pub fn encode(json: &[u8]) -> std::io::Result<String> {
    let mut gz = GzEncoder::new(Vec::new(), Compression::default());
    gz.write_all(json)?;
    Ok(STANDARD.encode(gz.finish()?))
}

/// The MachineConfig JSON bytes back from its ConfigMap(s), in any order: the single
/// `mc-<build>` ConfigMap, or every part of a split one (see the module documentation).
pub fn reassemble(config_maps: &[Value]) -> Result<Vec<u8>, ReassembleError> {
    let first = config_maps.first().ok_or(ReassembleError::Empty)?;
    let encoded = if config_maps.len() == 1
        && let Some(whole) = first["data"][MC_KEY].as_str()
    {
        whole.to_owned()
    } else {
        concatenate_parts(config_maps)?
    };
    decode(&encoded)
}

/// The MachineConfig JSON bytes from the files of a mounted MachineConfig ConfigMap (or the
/// one projected volume of its parts), as a build pod sees them: file name → content. The
/// whole encoding under [`MC_KEY`], else the parts `…part0` to `…part<N-1>`, all of them
/// (a gap is an error naming the missing part). Other files (a projected volume's
/// `..data` links, for instance) are ignored.
pub fn from_mounted_keys(
    files: &std::collections::BTreeMap<String, String>,
) -> Result<Vec<u8>, ReassembleError> {
    if let Some(whole) = files.get(MC_KEY) {
        return decode(whole);
    }
    let prefix = format!("{MC_KEY}.part");
    let mut parts: std::collections::BTreeMap<usize, &str> = std::collections::BTreeMap::new();
    for (name, value) in files {
        if let Some(i) = name.strip_prefix(&prefix).and_then(|i| i.parse().ok()) {
            parts.insert(i, value);
        }
    }
    if parts.is_empty() {
        return Err(ReassembleError::Empty);
    }
    let count = parts.keys().max().map_or(0, |m| m + 1);
    let missing: Vec<String> = (0..count)
        .filter(|i| !parts.contains_key(i))
        .map(|i| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(ReassembleError::Parts(format!(
            "missing part(s) {} of at least {count}",
            missing.join(", ")
        )));
    }
    decode(&parts.into_values().collect::<String>())
}

/// base64, then gunzip: the MachineConfig's JSON.
fn decode(encoded: &str) -> Result<Vec<u8>, ReassembleError> {
    let gzip = STANDARD
        .decode(encoded.trim().as_bytes())
        .map_err(|e| ReassembleError::Base64(e.to_string()))?;
    let mut json = Vec::new();
    GzDecoder::new(gzip.as_slice())
        .read_to_end(&mut json)
        .map_err(|e| ReassembleError::Gzip(e.to_string()))?;
    Ok(json)
}

fn concatenate_parts(config_maps: &[Value]) -> Result<String, ReassembleError> {
    let mut parts: Vec<Option<&str>> = Vec::new();
    for cm in config_maps {
        let name = cm["metadata"]["name"].as_str().unwrap_or("<unnamed>");
        let malformed = |problem: String| ReassembleError::Malformed {
            name: name.to_owned(),
            problem,
        };
        let annotation = |key: &str| -> Result<usize, ReassembleError> {
            let text = cm["metadata"]["annotations"][key]
                .as_str()
                .ok_or_else(|| malformed(format!("no annotation {key}")))?;
            text.parse()
                .map_err(|_| malformed(format!("annotation {key} is {text:?}, not a count")))
        };
        let count = annotation(MC_PARTS_ANNOTATION)?;
        let index = annotation(MC_PART_ANNOTATION)?;
        if parts.is_empty() {
            parts = vec![None; count];
        } else if parts.len() != count {
            return Err(ReassembleError::Parts(format!(
                "{name} says {count} parts, another part says {}",
                parts.len()
            )));
        }
        let value = cm["data"][mc_part_key(index).as_str()]
            .as_str()
            .ok_or_else(|| malformed(format!("no key {}", mc_part_key(index))))?;
        let slot = parts.get_mut(index).ok_or_else(|| {
            ReassembleError::Parts(format!("{name} is part {index} of only {count}"))
        })?;
        if slot.replace(value).is_some() {
            return Err(ReassembleError::Parts(format!("part {index} given twice")));
        }
    }
    let missing: Vec<String> = parts
        .iter()
        .enumerate()
        .filter(|(_, p)| p.is_none())
        .map(|(i, _)| i.to_string())
        .collect();
    if !missing.is_empty() {
        return Err(ReassembleError::Parts(format!(
            "missing part(s) {} of {}",
            missing.join(", "),
            parts.len()
        )));
    }
    Ok(parts.into_iter().flatten().collect())
}
