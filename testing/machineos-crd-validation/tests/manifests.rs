//! Real manifests (`../shared/upstream/manifests/`: openshift/api's CRD test objects, the
//! MCO's fixtures and docs, openshift-docs) are accepted by machineos's CRDs exactly where
//! OpenShift's accept them, with the same message where they are refused. Read in place
//! (they are not part of the repository); skipped with a notice when absent.

use machineos_crd_validation::Validator;
use serde_json::Value;
use std::path::{Path, PathBuf};

mod common;
use common::{machineos_crds, shared, shipped_crds};

fn yaml_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut paths: Vec<PathBuf> = entries.filter_map(|e| e.ok().map(|e| e.path())).collect();
    paths.sort();
    for p in paths {
        if p.is_dir() {
            yaml_files(&p, out);
        } else if matches!(p.extension().and_then(|e| e.to_str()), Some("yaml" | "yml")) {
            out.push(p);
        }
    }
}

/// The verdict of creating `obj` through the CRD named `crd`: the stored object, or the
/// error text.
fn verdict(
    crds: &std::collections::BTreeMap<String, Value>,
    crd: &str,
    obj: &Value,
) -> Result<Value, String> {
    let crd = crds.get(crd).ok_or_else(|| format!("no CRD {crd}"))?;
    let version = crd["spec"]["versions"][0]["name"].as_str().unwrap_or("v1");
    let v = Validator::from_crd(crd, version).map_err(|e| e.to_string())?;
    v.validate_create(obj).map_err(|e| e.to_string())
}

/// The one deliberate difference (machineos-api's `tests/upstream_crds.rs`): MachineOSConfig's
/// `imageBuilderType` enum lists machineos's own builders (`Native`, `OpenShiftBuild`) after
/// the MCO's `Job`, so a refusal of another value names more supported values. Same verdict;
/// the message compared without them.
fn without_own_builders(message: &str) -> String {
    // Only imageBuilderType's enum starts with "Job" followed by machineos's values.
    message.replace(
        r#"supported values: "Job", "Native", "OpenShiftBuild""#,
        r#"supported values: "Job""#,
    )
}

#[test]
fn manifests_are_accepted_exactly_where_openshift_accepts_them() {
    let Some(shipped) = shipped_crds() else {
        eprintln!(
            "NOT RUN: {} is absent (upstream data next to the checkout, not part of the repository)",
            shared().display()
        );
        return;
    };
    let ours = machineos_crds();
    let mut files = Vec::new();
    yaml_files(&shared().join("manifests"), &mut files);
    let (mut objects, mut accepted, mut refused) = (0, 0, 0);
    let mut differences = Vec::new();
    for f in &files {
        let text = std::fs::read_to_string(f).unwrap_or_default();
        let Ok(docs) = serde_saphyr::from_multiple::<Value>(&text) else {
            continue;
        };
        for obj in docs {
            let (Some(api), Some(kind)) = (obj["apiVersion"].as_str(), obj["kind"].as_str()) else {
                continue;
            };
            let Some(group) = api
                .strip_suffix("/v1")
                .filter(|g| *g == "machineconfiguration.openshift.io")
            else {
                continue;
            };
            let plural = format!("{}s", kind.to_lowercase());
            let crd = format!("{plural}.{group}");
            if !shipped.contains_key(&crd) {
                continue;
            }
            objects += 1;
            let theirs = verdict(&shipped, &crd, &obj);
            let mine = verdict(&ours, &crd, &obj).map_err(|e| without_own_builders(&e));
            match &theirs {
                Ok(_) => accepted += 1,
                Err(_) => refused += 1,
            }
            if theirs != mine {
                differences.push(format!(
                    "{}: {kind}\n  OpenShift: {theirs:?}\n  machineos: {mine:?}",
                    f.display()
                ));
            }
        }
    }
    eprintln!(
        "{objects} objects in {} files: {accepted} accepted, {refused} refused by OpenShift's CRDs",
        files.len()
    );
    assert!(objects > 40, "only {objects} objects found");
    assert!(
        differences.is_empty(),
        "{} differ:\n{}",
        differences.len(),
        differences.join("\n")
    );
}
