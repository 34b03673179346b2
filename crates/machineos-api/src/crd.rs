//! The CustomResourceDefinitions of every kind, generated from the Rust types so schema and
//! code cannot drift, and printed as one deterministic multi-document YAML for installation
//! (`kubectl apply -f`) and for the checked-in snapshot.
//!
//! The six MCO kinds' schemas (MachineConfiguration's included) equal openshift/api's shipped CRDs (MachineConfigNode: its
//! TechPreviewNoUpgrade variant) in every validation-relevant property; the one deliberate
//! difference is MachineOSConfig's `spec.imageBuilder.imageBuilderType` enum, which may list
//! machineos' own builders besides `Job`. Almost everything comes from schemars attributes on
//! the types (see `schema.rs`); [`finish`] is the single place that edits a generated CRD, for
//! what kube-derive and kube-core decide themselves, after every attribute has applied.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, JSONSchemaPropsOrArray, JSONSchemaPropsOrBool,
};
use kube::CustomResourceExt;

use crate::{operator_v1, v1, v1alpha1};

/// Every CRD, sorted by name.
pub fn crds() -> Vec<CustomResourceDefinition> {
    let mut all: Vec<_> = [
        v1::MachineConfig::crd(),
        v1::MachineConfigPool::crd(),
        v1::MachineOSConfig::crd(),
        v1::MachineOSBuild::crd(),
        v1::MachineConfigNode::crd(),
        v1alpha1::MachineOSImage::crd(),
        v1alpha1::MachineImage::crd(),
        operator_v1::MachineConfiguration::crd(),
    ]
    .into_iter()
    .map(finish)
    .collect();
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

/// The edits attributes cannot express, applied to every version's `openAPIV3Schema`:
///
/// 1. **Root `apiVersion`, `kind`, `metadata` properties** are added (`type: string`, `string`,
///    `object`, as every kubebuilder CRD has them). kube-derive generates the root struct and
///    marks these fields `#[schemars(skip)]`; the root struct cannot carry our attributes
///    (`#[kube(attr = …)]` rejects `serde`/`schemars`).
/// 2. **Root `status` is not nullable.** kube-derive's root struct has `status: Option<S>` and
///    kube-core's `AddNullable` transform, hard-wired into `crd()` after all type-level
///    attributes, turns that into `nullable: true`; the MCO's `status` is not nullable.
/// 3. **MachineConfig's `spec` is not required.** kube-derive's root field is a plain
///    `spec: MachineConfigSpec`, so schemars lists it as required; openshift/api does not
///    (a MachineConfig without spec is valid). Rust still needs a `spec` to deserialize one;
///    the MCO always writes it.
/// 4. **int-or-string fields** (`maxUnavailable`) get no `nullable` and an
///    `anyOf: [{type: integer}, {type: string}]`. kube-core's `OptionalIntOrString` transform
///    makes every non-required int-or-string nullable, and its `StructuralSchemaRewriter`
///    strips `type` out of `anyOf` branches, so neither can be set by an attribute; both run
///    inside `crd()`.
pub(crate) fn finish(mut crd: CustomResourceDefinition) -> CustomResourceDefinition {
    let spec_optional = crd.spec.names.kind == "MachineConfig";
    for version in &mut crd.spec.versions {
        let Some(root) = version
            .schema
            .as_mut()
            .and_then(|s| s.open_api_v3_schema.as_mut())
        else {
            continue;
        };
        let properties = root.properties.get_or_insert_with(BTreeMap::new);
        properties.insert(
            "apiVersion".into(),
            string_property(API_VERSION_DESCRIPTION),
        );
        properties.insert("kind".into(), string_property(KIND_DESCRIPTION));
        properties.insert(
            "metadata".into(),
            JSONSchemaProps {
                type_: Some("object".into()),
                ..Default::default()
            },
        );
        if let Some(status) = properties.get_mut("status") {
            status.nullable = None;
        }
        if spec_optional {
            if let Some(required) = &mut root.required {
                required.retain(|r| r != "spec");
            }
            if root.required.as_ref().is_some_and(Vec::is_empty) {
                root.required = None;
            }
        }
        int_or_string_any_of(root);
    }
    crd
}

/// The API server's description of `apiVersion`, as kubebuilder writes it.
const API_VERSION_DESCRIPTION: &str = "APIVersion defines the versioned schema of this representation of an object.\nServers should convert recognized schemas to the latest internal value, and\nmay reject unrecognized values.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources";

/// The API server's description of `kind`, as kubebuilder writes it.
const KIND_DESCRIPTION: &str = "Kind is a string value representing the REST resource this object represents.\nServers may infer this from the endpoint the client submits requests to.\nCannot be updated.\nIn CamelCase.\nMore info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds";

/// A `type: string` property with a description.
fn string_property(description: &str) -> JSONSchemaProps {
    JSONSchemaProps {
        description: Some(description.into()),
        type_: Some("string".into()),
        ..Default::default()
    }
}

/// Item 4 of [`finish`], everywhere below `schema`.
fn int_or_string_any_of(schema: &mut JSONSchemaProps) {
    if schema.x_kubernetes_int_or_string == Some(true) {
        schema.nullable = None;
        schema.any_of = Some(vec![
            JSONSchemaProps {
                type_: Some("integer".into()),
                ..Default::default()
            },
            JSONSchemaProps {
                type_: Some("string".into()),
                ..Default::default()
            },
        ]);
    }
    for child in schema.properties.iter_mut().flat_map(|p| p.values_mut()) {
        int_or_string_any_of(child);
    }
    match &mut schema.items {
        Some(JSONSchemaPropsOrArray::Schema(item)) => int_or_string_any_of(item),
        Some(JSONSchemaPropsOrArray::Schemas(items)) => {
            items.iter_mut().for_each(int_or_string_any_of)
        }
        None => {}
    }
    if let Some(JSONSchemaPropsOrBool::Schema(values)) = &mut schema.additional_properties {
        int_or_string_any_of(values);
    }
}
