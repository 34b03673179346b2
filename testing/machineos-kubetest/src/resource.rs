//! What the store knows about each resource: the [`Registry`] of [`ResourceInfo`]s.
//!
//! Built in are the kinds issue 13 names (Namespace, ConfigMap, Secret, Node, Pod, Event in
//! core/v1 and events.k8s.io/v1, ServiceAccount, Lease, the RBAC kinds (Role, RoleBinding,
//! ClusterRole, ClusterRoleBinding), Job, PodDisruptionBudget, the
//! CustomResourceDefinition itself, and build.openshift.io/v1 Build served like a custom
//! resource), each with its scope, names, whether it has a `status` subresource, whether it
//! tracks `metadata.generation`, its name rule, the field selectors it supports, whether it
//! takes strategic merge patches, and its default deletion propagation. A
//! CustomResourceDefinition (apiextensions.k8s.io/v1 JSON, as `machineos crds` prints it)
//! becomes a `ResourceInfo` through [`ResourceInfo::from_crd`]: scope, names, short names,
//! categories, served versions (storage version first), status subresource, printer
//! columns (kept for server-side `Table` rendering), the `openAPIV3Schema` of each served
//! version (for `/openapi/v3`), and one
//! [`machineos_crd_validation::Validator`] per served version.
//!
//! Simplifications: built-in kinds are not schema-validated (a real server decodes them
//! into typed structs; the few strategy checks and rewrites this server does reproduce, and
//! which kinds refuse unconditional updates, are [`crate::builtin`]'s); core/v1 and
//! events.k8s.io/v1 Events are two separate resources here, where a real server stores
//! both in one table (an events.k8s.io Event is mirrored into core/v1 by the store:
//! [`crate::events`]); custom resources are stored in the version they were written in (no
//! conversion between versions).

use std::collections::BTreeMap;
use std::sync::Arc;

use machineos_crd_validation::{BadValue, ErrorType, FieldError, Validator};
use serde_json::Value;

use crate::error::ApiError;
pub use crate::key::{GroupResource, ObjectKey};

/// Which names a kind accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NameRule {
    /// A DNS-1123 subdomain (most kinds).
    Subdomain,
    /// A DNS-1123 label (Namespace).
    Label,
}

/// How deleting an owner treats its dependents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Propagation {
    /// Owner goes now, dependents after it.
    Background,
    /// Dependents first (those with `blockOwnerDeletion` hold the owner), then the owner.
    Foreground,
    /// Dependents stay, their owner references to it removed.
    Orphan,
}

impl Propagation {
    /// Parses `propagationPolicy`.
    pub fn parse(s: &str) -> Result<Propagation, ApiError> {
        match s {
            "Background" => Ok(Propagation::Background),
            "Foreground" => Ok(Propagation::Foreground),
            "Orphan" => Ok(Propagation::Orphan),
            other => Err(ApiError::invalid(
                "meta.k8s.io",
                "DeleteOptions",
                "",
                vec![FieldError::new(
                    ErrorType::NotSupported,
                    Some("propagationPolicy".into()),
                    BadValue::Str(other.into()),
                    r#"supported values: "Foreground", "Background", "Orphan", "nil""#.into(),
                )],
            )),
        }
    }
}

/// Everything the store needs to know about one resource.
#[derive(Debug, Clone)]
pub struct ResourceInfo {
    /// The group.
    pub group: String,
    /// Served versions, the storage (preferred) version first.
    pub versions: Vec<String>,
    /// The kind (`ConfigMap`).
    pub kind: String,
    /// The list kind (`ConfigMapList`).
    pub list_kind: String,
    /// The plural (`configmaps`).
    pub plural: String,
    /// The singular (`configmap`).
    pub singular: String,
    /// Short names (`cm`).
    pub short_names: Vec<String>,
    /// Categories (`all`).
    pub categories: Vec<String>,
    /// Namespaced (else cluster-scoped).
    pub namespaced: bool,
    /// Whether a `status` subresource exists (main-endpoint writes keep the stored status).
    pub status_subresource: bool,
    /// Whether objects carry `metadata.generation`.
    pub tracks_generation: bool,
    /// The name rule.
    pub name_rule: NameRule,
    /// Field selector paths besides `metadata.name` and `metadata.namespace`.
    pub field_labels: Vec<String>,
    /// Whether strategic merge patch applies (built-in Kubernetes types only).
    pub strategic_merge: bool,
    /// The propagation a delete without `propagationPolicy` uses.
    pub default_propagation: Propagation,
    /// `additionalPrinterColumns` of the storage version (custom resources), for Table.
    pub printer_columns: Vec<Value>,
    /// The `openAPIV3Schema` of each served version (custom resources), for `/openapi/v3`.
    pub schemas: BTreeMap<String, Value>,
    /// Schema validators per served version (custom resources only).
    pub validators: BTreeMap<String, Arc<Validator>>,
}

impl ResourceInfo {
    /// The group and resource.
    pub fn gr(&self) -> GroupResource {
        GroupResource::new(&self.group, &self.plural)
    }

    /// `v1` or `group/v1` for `version`.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() {
            version.to_string()
        } else {
            format!("{}/{version}", self.group)
        }
    }

    /// The storage version's apiVersion.
    pub fn storage_api_version(&self) -> String {
        self.api_version(self.versions.first().map_or("v1", String::as_str))
    }

    /// Whether this is a custom resource (validated against a CRD schema).
    pub fn is_custom(&self) -> bool {
        !self.validators.is_empty()
    }

    fn builtin(group: &str, version: &str, kind: &str, plural: &str) -> ResourceInfo {
        ResourceInfo {
            group: group.into(),
            versions: vec![version.into()],
            kind: kind.into(),
            list_kind: format!("{kind}List"),
            plural: plural.into(),
            singular: kind.to_lowercase(),
            short_names: vec![],
            categories: vec![],
            namespaced: true,
            status_subresource: false,
            tracks_generation: false,
            name_rule: NameRule::Subdomain,
            field_labels: vec![],
            strategic_merge: true,
            default_propagation: Propagation::Background,
            printer_columns: vec![],
            schemas: BTreeMap::new(),
            validators: BTreeMap::new(),
        }
    }

    /// The resource a CustomResourceDefinition defines.
    pub fn from_crd(crd: &Value) -> Result<ResourceInfo, ApiError> {
        let name = crd
            .pointer("/metadata/name")
            .and_then(Value::as_str)
            .unwrap_or("");
        let invalid = |field: &str, value: BadValue, detail: &str| {
            ApiError::invalid(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                name,
                vec![FieldError::new(
                    ErrorType::Invalid,
                    Some(field.into()),
                    value,
                    detail.into(),
                )],
            )
        };
        let required = |field: &str| {
            ApiError::invalid(
                "apiextensions.k8s.io",
                "CustomResourceDefinition",
                name,
                vec![FieldError::new(
                    ErrorType::Required,
                    Some(field.into()),
                    BadValue::Omit,
                    String::new(),
                )],
            )
        };
        let s = |p: &str| crd.pointer(p).and_then(Value::as_str);
        let strings = |p: &str| crate::json::strings_at(crd, p);
        let group = s("/spec/group").ok_or_else(|| required("spec.group"))?;
        let plural = s("/spec/names/plural").ok_or_else(|| required("spec.names.plural"))?;
        let kind = s("/spec/names/kind").ok_or_else(|| required("spec.names.kind"))?;
        if name != format!("{plural}.{group}") {
            return Err(invalid(
                "metadata.name",
                BadValue::Str(name.into()),
                r#"must be spec.names.plural+"."+spec.group"#,
            ));
        }
        let namespaced = match s("/spec/scope") {
            Some("Namespaced") => true,
            Some("Cluster") => false,
            Some(other) => {
                return Err(ApiError::invalid(
                    "apiextensions.k8s.io",
                    "CustomResourceDefinition",
                    name,
                    vec![FieldError::new(
                        ErrorType::NotSupported,
                        Some("spec.scope".into()),
                        BadValue::Str(other.into()),
                        r#"supported values: "Cluster", "Namespaced""#.into(),
                    )],
                ));
            }
            None => return Err(required("spec.scope")),
        };
        let versions = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .filter(|v| !v.is_empty())
            .ok_or_else(|| required("spec.versions"))?;
        let mut served = Vec::new();
        let mut validators = BTreeMap::new();
        let mut status_subresource = false;
        let mut printer_columns = Vec::new();
        let mut schemas = BTreeMap::new();
        for (i, v) in versions.iter().enumerate() {
            let vname = v.get("name").and_then(Value::as_str).unwrap_or("");
            let storage = v.get("storage").and_then(Value::as_bool) == Some(true);
            if v.get("served").and_then(Value::as_bool) != Some(true) && !storage {
                continue;
            }
            let validator = Validator::from_crd(crd, vname).map_err(|e| {
                invalid(
                    &format!("spec.versions[{i}].schema.openAPIV3Schema"),
                    BadValue::Omit,
                    &e.to_string(),
                )
            })?;
            if storage {
                status_subresource = validator.has_status_subresource();
                printer_columns = v
                    .get("additionalPrinterColumns")
                    .and_then(Value::as_array)
                    .cloned()
                    .unwrap_or_default();
                served.insert(0, vname.to_string());
            } else {
                served.push(vname.to_string());
            }
            validators.insert(vname.to_string(), Arc::new(validator));
            if let Some(schema) = v.pointer("/schema/openAPIV3Schema") {
                schemas.insert(vname.to_string(), schema.clone());
            }
        }
        if validators.is_empty() {
            return Err(required("spec.versions[0].served"));
        }
        Ok(ResourceInfo {
            group: group.into(),
            versions: served,
            kind: kind.into(),
            list_kind: s("/spec/names/listKind")
                .map(String::from)
                .unwrap_or_else(|| format!("{kind}List")),
            plural: plural.into(),
            singular: s("/spec/names/singular")
                .map(String::from)
                .unwrap_or_else(|| kind.to_lowercase()),
            short_names: strings("/spec/names/shortNames"),
            categories: strings("/spec/names/categories"),
            namespaced,
            status_subresource,
            tracks_generation: true,
            name_rule: NameRule::Subdomain,
            field_labels: vec![],
            strategic_merge: false,
            default_propagation: Propagation::Background,
            printer_columns,
            schemas,
            validators,
        })
    }
}

/// The resources the store serves, by group and plural.
#[derive(Debug, Clone, Default)]
pub struct Registry {
    resources: BTreeMap<GroupResource, ResourceInfo>,
}

/// The group and plural of CustomResourceDefinitions.
pub fn crd_gr() -> GroupResource {
    GroupResource::new("apiextensions.k8s.io", "customresourcedefinitions")
}

impl Registry {
    /// The built-in resources.
    pub fn builtin() -> Registry {
        let b = ResourceInfo::builtin;
        let with = |mut r: ResourceInfo, f: &dyn Fn(&mut ResourceInfo)| {
            f(&mut r);
            r
        };
        let short = |names: &[&str]| names.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let event_labels = short(&[
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ]);
        let all = [
            with(b("", "v1", "Namespace", "namespaces"), &|r| {
                r.namespaced = false;
                r.status_subresource = true;
                r.name_rule = NameRule::Label;
                r.short_names = short(&["ns"]);
                r.field_labels = short(&["status.phase"]);
            }),
            with(b("", "v1", "ConfigMap", "configmaps"), &|r| {
                r.short_names = short(&["cm"]);
            }),
            with(b("", "v1", "Secret", "secrets"), &|r| {
                r.field_labels = short(&["type"]);
            }),
            with(b("", "v1", "ServiceAccount", "serviceaccounts"), &|r| {
                r.short_names = short(&["sa"]);
            }),
            with(b("", "v1", "Node", "nodes"), &|r| {
                r.namespaced = false;
                r.status_subresource = true;
                r.short_names = short(&["no"]);
                r.field_labels = short(&["spec.unschedulable"]);
            }),
            with(b("", "v1", "Pod", "pods"), &|r| {
                r.status_subresource = true;
                r.short_names = short(&["po"]);
                r.categories = short(&["all"]);
                r.field_labels = short(&[
                    "spec.nodeName",
                    "spec.restartPolicy",
                    "spec.schedulerName",
                    "spec.serviceAccountName",
                    "spec.hostNetwork",
                    "status.phase",
                    "status.podIP",
                    "status.nominatedNodeName",
                ]);
            }),
            with(b("", "v1", "Event", "events"), &|r| {
                r.short_names = short(&["ev"]);
                r.field_labels = event_labels.clone();
            }),
            with(b("events.k8s.io", "v1", "Event", "events"), &|r| {
                r.short_names = short(&["ev"]);
                r.field_labels = short(&[
                    "regarding.kind",
                    "regarding.namespace",
                    "regarding.name",
                    "regarding.uid",
                    "reason",
                    "reportingController",
                    "type",
                ]);
            }),
            b("coordination.k8s.io", "v1", "Lease", "leases"),
            // RBAC: what the server authorizes ServiceAccounts' requests by (crate::http::rbac).
            b("rbac.authorization.k8s.io", "v1", "Role", "roles"),
            b(
                "rbac.authorization.k8s.io",
                "v1",
                "RoleBinding",
                "rolebindings",
            ),
            with(
                b(
                    "rbac.authorization.k8s.io",
                    "v1",
                    "ClusterRole",
                    "clusterroles",
                ),
                &|r| r.namespaced = false,
            ),
            with(
                b(
                    "rbac.authorization.k8s.io",
                    "v1",
                    "ClusterRoleBinding",
                    "clusterrolebindings",
                ),
                &|r| r.namespaced = false,
            ),
            // What `deploy/` installs besides: the controller's Service, its Deployment and
            // the agent's DaemonSet — stored (and their status written by a test standing in
            // for their controllers); nothing here runs their pods.
            with(b("", "v1", "Service", "services"), &|r| {
                r.status_subresource = true;
                r.short_names = short(&["svc"]);
                r.categories = short(&["all"]);
            }),
            with(b("apps", "v1", "Deployment", "deployments"), &|r| {
                r.status_subresource = true;
                r.tracks_generation = true;
                r.short_names = short(&["deploy"]);
                r.categories = short(&["all"]);
            }),
            with(b("apps", "v1", "DaemonSet", "daemonsets"), &|r| {
                r.status_subresource = true;
                r.tracks_generation = true;
                r.short_names = short(&["ds"]);
                r.categories = short(&["all"]);
            }),
            with(b("batch", "v1", "Job", "jobs"), &|r| {
                r.status_subresource = true;
                r.tracks_generation = true;
                r.categories = short(&["all"]);
                r.field_labels = short(&["status.successful"]);
                // batch/v1 Jobs default to orphaning their pods (kubectl always sends
                // an explicit propagationPolicy).
                r.default_propagation = Propagation::Orphan;
            }),
            with(
                b(
                    "policy",
                    "v1",
                    "PodDisruptionBudget",
                    "poddisruptionbudgets",
                ),
                &|r| {
                    r.status_subresource = true;
                    r.tracks_generation = true;
                    r.short_names = short(&["pdb"]);
                },
            ),
            with(
                b(
                    "apiextensions.k8s.io",
                    "v1",
                    "CustomResourceDefinition",
                    "customresourcedefinitions",
                ),
                &|r| {
                    r.namespaced = false;
                    r.status_subresource = true;
                    r.tracks_generation = true;
                    r.short_names = short(&["crd", "crds"]);
                    r.categories = short(&["api-extensions"]);
                    r.strategic_merge = false;
                },
            ),
            with(b("build.openshift.io", "v1", "Build", "builds"), &|r| {
                r.status_subresource = true;
                r.tracks_generation = true;
                r.strategic_merge = false;
            }),
        ];
        Registry {
            resources: all.into_iter().map(|r| (r.gr(), r)).collect(),
        }
    }

    /// The resource `gr`.
    pub fn get(&self, gr: &GroupResource) -> Option<&ResourceInfo> {
        self.resources.get(gr)
    }

    /// The resource `gr`, or 404.
    pub fn require(&self, gr: &GroupResource) -> Result<&ResourceInfo, ApiError> {
        self.get(gr)
            .ok_or_else(|| ApiError::UnknownResource { gr: gr.clone() })
    }

    /// The resource serving `kind` in `group`.
    pub fn by_kind(&self, group: &str, kind: &str) -> Option<&ResourceInfo> {
        self.resources
            .values()
            .find(|r| r.group == group && r.kind == kind)
    }

    /// The resources whose plural, singular, short name or lowercase kind is `name`
    /// (how `kubectl get NAME` resolves), in group order.
    pub fn resolve(&self, name: &str) -> Vec<&ResourceInfo> {
        let name = name.to_lowercase();
        self.resources
            .values()
            .filter(|r| {
                r.plural == name
                    || r.singular == name
                    || r.kind.to_lowercase() == name
                    || r.short_names.contains(&name)
            })
            .collect()
    }

    /// All resources.
    pub fn all(&self) -> impl Iterator<Item = &ResourceInfo> {
        self.resources.values()
    }

    /// Adds or replaces a resource (a CRD's).
    pub fn insert(&mut self, info: ResourceInfo) {
        self.resources.insert(info.gr(), info);
    }

    /// Removes a resource.
    pub fn remove(&mut self, gr: &GroupResource) -> Option<ResourceInfo> {
        self.resources.remove(gr)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn builtins_have_their_scope_names_and_subresources() {
        let r = Registry::builtin();
        let cases: Vec<(&str, &str, &str, bool, bool)> = vec![
            // group, plural, kind, namespaced, status subresource
            ("", "namespaces", "Namespace", false, true),
            ("", "configmaps", "ConfigMap", true, false),
            ("", "secrets", "Secret", true, false),
            ("", "nodes", "Node", false, true),
            ("", "pods", "Pod", true, true),
            ("", "events", "Event", true, false),
            ("events.k8s.io", "events", "Event", true, false),
            ("", "serviceaccounts", "ServiceAccount", true, false),
            ("coordination.k8s.io", "leases", "Lease", true, false),
            ("rbac.authorization.k8s.io", "roles", "Role", true, false),
            (
                "rbac.authorization.k8s.io",
                "rolebindings",
                "RoleBinding",
                true,
                false,
            ),
            (
                "rbac.authorization.k8s.io",
                "clusterroles",
                "ClusterRole",
                false,
                false,
            ),
            (
                "rbac.authorization.k8s.io",
                "clusterrolebindings",
                "ClusterRoleBinding",
                false,
                false,
            ),
            ("batch", "jobs", "Job", true, true),
            (
                "policy",
                "poddisruptionbudgets",
                "PodDisruptionBudget",
                true,
                true,
            ),
            ("build.openshift.io", "builds", "Build", true, true),
        ];
        for (g, p, k, ns, st) in cases {
            let i = r.get(&GroupResource::new(g, p)).unwrap();
            assert_eq!(
                (i.kind.as_str(), i.namespaced, i.status_subresource),
                (k, ns, st)
            );
        }
        assert_eq!(r.resolve("cm")[0].plural, "configmaps");
        assert_eq!(r.resolve("ev").len(), 2);
        assert_eq!(r.by_kind("batch", "Job").unwrap().plural, "jobs");
        assert!(matches!(
            r.require(&GroupResource::new("x", "y")),
            Err(ApiError::UnknownResource { .. })
        ));
    }

    fn crd(name: &str) -> Value {
        json!({
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "CustomResourceDefinition",
            "metadata": {"name": name},
            "spec": {
                "group": "example.com",
                "scope": "Cluster",
                "names": {"kind": "Widget", "plural": "widgets", "shortNames": ["wd"], "categories": ["all"]},
                "versions": [
                    {"name": "v1beta1", "served": true, "storage": false,
                     "schema": {"openAPIV3Schema": {"type": "object"}}},
                    {"name": "v1", "served": true, "storage": true,
                     "subresources": {"status": {}},
                     "additionalPrinterColumns": [{"name": "Size", "type": "integer", "jsonPath": ".spec.size"}],
                     "schema": {"openAPIV3Schema": {"type": "object"}}}
                ]
            }
        })
    }

    #[test]
    fn a_crd_becomes_a_resource() {
        let i = ResourceInfo::from_crd(&crd("widgets.example.com")).unwrap();
        assert_eq!(i.versions, ["v1", "v1beta1"]);
        assert!(!i.namespaced && i.status_subresource && i.tracks_generation && i.is_custom());
        assert_eq!(
            (i.singular.as_str(), i.list_kind.as_str()),
            ("widget", "WidgetList")
        );
        assert_eq!(i.short_names, ["wd"]);
        assert_eq!(i.printer_columns[0]["name"], "Size");
        assert_eq!(i.storage_api_version(), "example.com/v1");
        let e = ResourceInfo::from_crd(&crd("wrong.example.com")).unwrap_err();
        assert_eq!(
            e.to_string(),
            r#"CustomResourceDefinition.apiextensions.k8s.io "wrong.example.com" is invalid: metadata.name: Invalid value: "wrong.example.com": must be spec.names.plural+"."+spec.group"#
        );
    }
}
