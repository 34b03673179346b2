//! Schema fragments shared by the kinds, so each of openshift/api's validation markers (CEL
//! rule text and message, bounds, patterns, map and list types) is written once and attached
//! with schemars attributes:
//!
//! * `#[schemars(transform = schema::dns1123_subdomain_lowercase)]` and its siblings push one
//!   `x-kubernetes-validations` rule, with the exact text and message the MCO's CRDs carry.
//! * `#[schemars(transform = schema::no_default)]` drops the `default` schemars derives from
//!   `#[serde(default)]` on fields the MCO declares without one (the API server would store
//!   it).
//! * `#[schemars(transform = schema::metav1_conditions)]` adds metav1.Condition's markers to a
//!   `Vec<Condition>` (k8s-openapi's schema has the shape, not the bounds).
//! * `#[schemars(schema_with = …)]` functions for the few schemas that differ from a Rust
//!   type's own: an atomic LabelSelector, a release image.
//!
//! Whatever kube-derive decides itself (the root object) is fixed up in `crd.rs` instead.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::LabelSelector;
use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde_json::{Value, json};

use crate::image::{DIGEST_SUFFIX_MESSAGE, DIGEST_SUFFIX_RULE, DigestedImage};

/// The rule openshift/api puts on names checked with `format.dns1123Subdomain()`.
const DNS1123_SUBDOMAIN_RULE: &str = "!format.dns1123Subdomain().validate(self).hasValue()";

/// Remove the `default` schemars derived from `#[serde(default)]`.
pub(crate) fn no_default(schema: &mut Schema) {
    schema.remove("default");
}

/// Append a CEL rule (`x-kubernetes-validations` entry) with its message.
pub(crate) fn push_rule(schema: &mut Schema, rule: &str, message: &str) {
    let Some(obj) = schema.as_object_mut() else {
        return;
    };
    let rules = obj
        .entry("x-kubernetes-validations")
        .or_insert_with(|| Value::Array(Vec::new()));
    if let Value::Array(rules) = rules {
        rules.push(json!({"rule": rule, "message": message}));
    }
}

/// A lowercase RFC 1123 subdomain (openshift/api's names of pools, secrets, nodes, configs).
pub(crate) fn dns1123_subdomain_lowercase(schema: &mut Schema) {
    push_rule(
        schema,
        DNS1123_SUBDOMAIN_RULE,
        "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character.",
    );
}

/// An RFC 1123 subdomain, with the message of `OSImageStreamReference` (same rule as
/// [`dns1123_subdomain_lowercase`], other wording).
pub(crate) fn dns1123_subdomain(schema: &mut Schema) {
    push_rule(
        schema,
        DNS1123_SUBDOMAIN_RULE,
        "a RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character.",
    );
}

/// An RFC 1123 label (a namespace).
pub(crate) fn dns1123_label(schema: &mut Schema) {
    push_rule(
        schema,
        "!format.dns1123Label().validate(self).hasValue()",
        "the value must consist of only lowercase alphanumeric characters and hyphens",
    );
}

/// An RFC 1035 label (a resource).
pub(crate) fn dns1035_label(schema: &mut Schema) {
    push_rule(
        schema,
        "!format.dns1035Label().validate(self).hasValue()",
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character",
    );
}

/// A tagged push spec (`renderedImagePushSpec`): `host[:port][/namespace]/name:<tag>`, or an
/// in-cluster `.svc` registry with port, repository, name and tag.
pub(crate) fn tag_pull_spec(schema: &mut Schema) {
    push_rule(
        schema,
        r"self.matches('^([a-zA-Z0-9-]+\\.)+[a-zA-Z0-9-]+(:[0-9]{2,5})?(/[a-zA-Z0-9-_]{1,61})*/[a-zA-Z0-9-_.]+:[a-zA-Z0-9._-]+$') || self.matches('^[^.]+\\.[^.]+\\.svc:\\d+\\/[^\\/]+\\/[^\\/]+:[^\\/]+$')",
        "the OCI Image name should follow the host[:port][/namespace]/name format, resembling a valid URL without the scheme. Or it must be a valid .svc followed by a port, repository, image name, and tag.",
    );
}

/// `x-kubernetes-map-type: atomic`: server-side apply replaces the object as a whole.
pub(crate) fn atomic_map(schema: &mut Schema) {
    schema.insert("x-kubernetes-map-type".into(), json!("atomic"));
}

/// For a list: its items are atomic maps (see [`atomic_map`]).
pub(crate) fn atomic_items(schema: &mut Schema) {
    if let Some(Value::Object(items)) = schema.get_mut("items") {
        items.insert("x-kubernetes-map-type".into(), json!("atomic"));
    }
}

/// A metav1 LabelSelector as openshift/api declares it: an atomic map whose
/// `matchExpressions` and their `values` are atomic lists.
pub(crate) fn label_selector(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = LabelSelector::json_schema(generator);
    atomic_map(&mut schema);
    if let Some(Value::Object(expressions)) = schema
        .get_mut("properties")
        .and_then(|p| p.get_mut("matchExpressions"))
    {
        expressions.insert("x-kubernetes-list-type".into(), json!("atomic"));
        if let Some(Value::Object(values)) = expressions
            .get_mut("items")
            .and_then(|i| i.get_mut("properties"))
            .and_then(|p| p.get_mut("values"))
        {
            values.insert("x-kubernetes-list-type".into(), json!("atomic"));
        }
    }
    schema
}

/// metav1.Condition's kubebuilder markers, added to the items of a `Vec<Condition>` field:
/// `type` (qualified name, ≤ 316), `status` (True/False/Unknown), `observedGeneration` ≥ 0,
/// `reason` (CamelCase identifier, 1–1024), `message` ≤ 32768.
pub(crate) fn metav1_conditions(schema: &mut Schema) {
    let Some(Value::Object(properties)) = schema
        .get_mut("items")
        .and_then(|i| i.get_mut("properties"))
    else {
        return;
    };
    let markers = [
        (
            "type",
            json!({
                "maxLength": 316,
                "pattern": r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
            }),
        ),
        ("status", json!({"enum": ["True", "False", "Unknown"]})),
        ("observedGeneration", json!({"minimum": 0})),
        (
            "reason",
            json!({
                "minLength": 1,
                "maxLength": 1024,
                "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
            }),
        ),
        ("message", json!({"maxLength": 32768})),
    ];
    for (name, extra) in markers {
        if let (Some(Value::Object(property)), Value::Object(extra)) =
            (properties.get_mut(name), extra)
        {
            property.extend(extra);
        }
    }
}

/// The release image of an internal release bundle (MachineConfigNode
/// `status.internalReleaseImage.releases[].image`): a [`DigestedImage`] whose host may also be
/// `localhost`, with openshift/api's own wording.
pub(crate) fn release_image(generator: &mut SchemaGenerator) -> Schema {
    let mut schema = DigestedImage::json_schema(generator);
    schema.remove("x-kubernetes-validations");
    push_rule(&mut schema, DIGEST_SUFFIX_RULE, DIGEST_SUFFIX_MESSAGE);
    push_rule(
        &mut schema,
        r"(self.split('@')[0].matches('^(localhost|([a-zA-Z0-9-]+\\.)+[a-zA-Z0-9-]+)(:[0-9]{2,5})?/([a-zA-Z0-9-_]{0,61}/)?[a-zA-Z0-9-_.]*?$'))",
        "the OCI Image name should follow the host[:port][/namespace]/name format, resembling a valid URL without the scheme; host must be either 'localhost' or a dot-qualified domain name",
    );
    schema
}
