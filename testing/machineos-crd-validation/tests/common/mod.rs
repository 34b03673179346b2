//! What the integration tests share: the CRDs OpenShift ships (read where they are, next to
//! the checkout — they are not part of the repository) and machineos's generated ones, by name.

#![allow(dead_code)]

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::PathBuf;

/// `../shared/upstream` next to the checkout: public upstream data, read in place.
pub fn shared() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/upstream")
}

/// The shipped CRDs: the directory `MACHINEOS_OPENSHIFT_API_CRDS` names (as
/// machineos-api's `tests/upstream_crds.rs` reads it), else the copy in the upstream data directory beside the checkout ([`shared`]).
pub fn shipped_dir() -> PathBuf {
    match std::env::var_os("MACHINEOS_OPENSHIFT_API_CRDS") {
        Some(dir) => PathBuf::from(dir),
        None => shared().join("openshift-api-crds"),
    }
}

/// The shipped CRDs by name (MachineConfigNode: the TechPreviewNoUpgrade variant, the
/// superset machineos implements).
pub fn shipped_crds() -> Option<BTreeMap<String, Value>> {
    let dir = shipped_dir();
    if !dir.is_dir() {
        return None;
    }
    Some(crds_in(&dir))
}

/// The CRDs in the YAML files of `dir` and of its `techpreview/` (one CRD per file), by
/// name; a CRD in `techpreview/` replaces one of the same name.
pub fn crds_in(dir: &std::path::Path) -> BTreeMap<String, Value> {
    let mut out = BTreeMap::new();
    for sub in [dir.to_path_buf(), dir.join("techpreview")] {
        let Ok(entries) = std::fs::read_dir(&sub) else {
            continue;
        };
        let mut files: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
        files.sort();
        for f in files {
            if f.extension().and_then(|e| e.to_str()) != Some("yaml") {
                continue;
            }
            let text =
                std::fs::read_to_string(&f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let crd: Value =
                serde_saphyr::from_str(&text).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let name = crd["metadata"]["name"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            // The techpreview directory is read last and replaces the Default variant.
            out.insert(name, crd);
        }
    }
    out
}

pub fn machineos_crds() -> BTreeMap<String, Value> {
    machineos_api::crds()
        .into_iter()
        .map(|c| {
            let v = serde_json::to_value(&c).expect("a CRD serializes to JSON");
            (
                v["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_string(),
                v,
            )
        })
        .collect()
}
