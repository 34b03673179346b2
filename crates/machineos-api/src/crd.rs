//! The CustomResourceDefinitions of every kind, generated from the Rust types so schema and
//! code cannot drift, and printed as one deterministic multi-document YAML for installation
//! (`kubectl apply -f`) and for the checked-in snapshot.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::CustomResourceExt;

use crate::{v1, v1alpha1};

/// Every CRD, sorted by name.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut all = vec![
        v1::MachineConfig::crd(),
        v1::MachineConfigPool::crd(),
        v1::MachineOSConfig::crd(),
        v1::MachineOSBuild::crd(),
        v1::MachineConfigNode::crd(),
        v1alpha1::MachineOSImage::crd(),
        v1alpha1::MachineImage::crd(),
    ];
    all.sort_by(|a, b| a.metadata.name.cmp(&b.metadata.name));
    all
}

/// Every CRD as multi-document YAML, in the order of [`crds`]; each document starts with
/// `---`. Byte-identical across runs.
pub fn crds_yaml() -> String {
    let mut out = String::new();
    for crd in crds() {
        out.push_str("---\n");
        // A CRD is plain data (strings, numbers, maps with string keys); the YAML writer
        // cannot fail on it, so a failure here is a bug in this crate, not bad input.
        let doc =
            serde_saphyr::to_string(&crd).expect("a CustomResourceDefinition serializes to YAML");
        out.push_str(&doc);
        if !doc.ends_with('\n') {
            out.push('\n');
        }
    }
    out
}
