//! RBAC for ServiceAccounts: which requests a ServiceAccount's token may make, decided from
//! the Roles, ClusterRoles and their bindings in the store — so a component runs against the
//! test API server with the permissions `deploy/` gives it, and a missing rule is a 403 here
//! as on a real cluster, not a surprise in production.
//!
//! Written from kube-apiserver's RBAC authorizer (`plugin/pkg/auth/authorizer/rbac/rbac.go`,
//! `rbac/v1/evaluation_helpers.go`):
//! * **Who.** A ServiceAccount token is the user `system:serviceaccount:<ns>:<name>` in the
//!   groups `system:serviceaccounts`, `system:serviceaccounts:<ns>` and
//!   `system:authenticated`. A subject matches as `ServiceAccount` (name and namespace),
//!   `User` (the full user name) or `Group` (one of the groups).
//! * **Where.** A ClusterRoleBinding grants its ClusterRole's rules everywhere; a
//!   RoleBinding grants its Role's (of its namespace) or ClusterRole's rules in its own
//!   namespace only — never on cluster-scoped resources.
//! * **What.** A rule allows a resource request when its `verbs`, `apiGroups` and
//!   `resources` each contain the request's (or `*`; `resources` as `plural/subresource`,
//!   `*/subresource` matching any resource's), and `resourceNames` is empty or contains the
//!   request's object name (so a rule naming objects never allows `list`, `watch` or
//!   `create` of the collection); a non-resource request when `nonResourceURLs` contains its
//!   path or a `prefix*` of it, and `verbs` its verb.
//! * Deny by default; there is no deny rule. Roles are read from the store at each request
//!   (a test harness: a few dozen objects), so a binding applied takes effect at once.
//!
//! * **Admission.** A ServiceAccount's create is also checked as OpenShift's
//!   `OwnerReferencesPermissionEnforcement` does (`plugin/pkg/admission/gc/gc_admission.go`):
//!   an owner reference with `blockOwnerDeletion: true` needs `update` on the owner's
//!   `finalizers` ([`crate::http`]'s `owner_references_permitted`).
//! * **Audit.** Every allowed request is kept; [`unused_grants`] lists the verbs of a
//!   ServiceAccount's roles that none used — what a least-privilege role can lose.
//!
//! Simplifications: no aggregated ClusterRoles (`aggregationRule`), no escalation checks on
//! writing roles, no impersonation; the default `system:*` ClusterRoles exist only in so
//! far as a test applies them (a ServiceAccount may always `GET` the discovery and
//! `/version` paths, which kube-apiserver's `system:discovery` grants to everyone
//! authenticated).

use serde_json::Value;

/// An authenticated ServiceAccount.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServiceAccount {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ServiceAccount {
    /// The user name RBAC and audit logs know it by.
    pub fn user(&self) -> String {
        format!("system:serviceaccount:{}:{}", self.namespace, self.name)
    }

    fn groups(&self) -> [String; 3] {
        [
            "system:serviceaccounts".to_owned(),
            format!("system:serviceaccounts:{}", self.namespace),
            "system:authenticated".to_owned(),
        ]
    }
}

/// A request as the authorizer sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Request<'a> {
    /// A request on a resource.
    Resource {
        /// The audit verb (`get`, `list`, `watch`, `create`, `update`, `patch`, `delete`, …).
        verb: &'a str,
        /// The API group (`""` for core).
        group: &'a str,
        /// `plural` or `plural/subresource`.
        resource: &'a str,
        /// The namespace of a namespaced request.
        namespace: Option<&'a str>,
        /// The object's name, when the request addresses one.
        name: Option<&'a str>,
    },
    /// Anything else (discovery, `/version`, `/openapi/v3`).
    NonResource {
        /// The lower-cased method.
        verb: &'a str,
        /// The path.
        path: &'a str,
    },
}

/// Whether `sa` may make `req`, given every stored object (only RBAC kinds are read).
pub fn allowed<'o>(
    sa: &ServiceAccount,
    req: &Request<'_>,
    objects: impl Iterator<Item = &'o Value> + Clone,
) -> bool {
    if let Request::NonResource { verb: "get", path } = req
        && is_discovery(path)
    {
        return true;
    }
    let of_kind = |kind: &'static str| {
        objects
            .clone()
            .filter(move |o| o["apiVersion"] == "rbac.authorization.k8s.io/v1" && o["kind"] == kind)
    };
    let find = |kind: &'static str, ns: Option<&str>, name: &str| {
        of_kind(kind).find(|o| {
            o["metadata"]["name"] == name && ns.is_none_or(|ns| o["metadata"]["namespace"] == ns)
        })
    };
    let rules_allow = |role: Option<&Value>| {
        role.and_then(|r| r["rules"].as_array())
            .is_some_and(|rules| rules.iter().any(|rule| rule_allows(rule, req)))
    };
    // Cluster-wide grants.
    for b in of_kind("ClusterRoleBinding") {
        if binds(b, sa) && b["roleRef"]["kind"] == "ClusterRole" {
            let name = b["roleRef"]["name"].as_str().unwrap_or_default();
            if rules_allow(find("ClusterRole", None, name)) {
                return true;
            }
        }
    }
    // Namespaced grants: only for namespaced requests in the binding's namespace.
    let Request::Resource {
        namespace: Some(ns),
        ..
    } = req
    else {
        return false;
    };
    for b in of_kind("RoleBinding").filter(|b| b["metadata"]["namespace"] == *ns) {
        if !binds(b, sa) {
            continue;
        }
        let name = b["roleRef"]["name"].as_str().unwrap_or_default();
        let role = match b["roleRef"]["kind"].as_str() {
            Some("Role") => find("Role", Some(ns), name),
            Some("ClusterRole") => find("ClusterRole", None, name),
            _ => None,
        };
        if rules_allow(role) {
            return true;
        }
    }
    false
}

/// A resource request a ServiceAccount made and RBAC allowed, kept for [`unused_grants`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allowed {
    /// Who made it.
    pub sa: ServiceAccount,
    /// The audit verb.
    pub verb: String,
    /// The API group (`""` for core).
    pub group: String,
    /// `plural` or `plural/subresource`.
    pub resource: String,
    /// The namespace of a namespaced request.
    pub namespace: Option<String>,
    /// The object's name, when the request addressed one.
    pub name: Option<String>,
}

/// Every grant the roles bound to `sa` hold that none of `requests` used: one line per
/// (role, verb, resource), `ClusterRole machineos-agent: watch pods` or
/// `Role machineos/machineos-controller: update secrets [machineos-node-pull-secrets]` — the
/// verbs a least-privilege role can lose. Wildcards are reported as written (a `*` rule is
/// never "used" by one request). Non-resource rules are not audited.
pub fn unused_grants<'o>(
    sa: &ServiceAccount,
    requests: &[Allowed],
    objects: impl Iterator<Item = &'o Value> + Clone,
) -> Vec<String> {
    let of_kind = |kind: &'static str| {
        objects
            .clone()
            .filter(move |o| o["apiVersion"] == "rbac.authorization.k8s.io/v1" && o["kind"] == kind)
    };
    let strs = |v: &Value| -> Vec<String> {
        v.as_array()
            .map(|l| {
                l.iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut out = Vec::new();
    // (role label, binding namespace — None for cluster-wide —, the role).
    let mut roles: Vec<(String, Option<String>, Value)> = Vec::new();
    for b in of_kind("ClusterRoleBinding").chain(of_kind("RoleBinding")) {
        if !binds(b, sa) {
            continue;
        }
        let ns = b["metadata"]["namespace"].as_str().map(str::to_owned);
        let kind = b["roleRef"]["kind"].as_str().unwrap_or_default();
        let name = b["roleRef"]["name"].as_str().unwrap_or_default();
        let role = of_kind(if kind == "Role" {
            "Role"
        } else {
            "ClusterRole"
        })
        .find(|o| {
            o["metadata"]["name"] == name
                && (kind != "Role" || o["metadata"]["namespace"].as_str() == ns.as_deref())
        });
        if let Some(role) = role {
            let label = match &ns {
                Some(ns) if kind == "Role" => format!("Role {ns}/{name}"),
                _ => format!("ClusterRole {name}"),
            };
            roles.push((label, ns, role.clone()));
        }
    }
    for (label, ns, role) in roles {
        for rule in role["rules"].as_array().into_iter().flatten() {
            let names = strs(&rule["resourceNames"]);
            for verb in strs(&rule["verbs"]) {
                for group in strs(&rule["apiGroups"]) {
                    for resource in strs(&rule["resources"]) {
                        let used = requests.iter().any(|r| {
                            r.sa == *sa
                                && r.verb == verb
                                && r.group == group
                                && r.resource == resource
                                && (ns.is_none() || r.namespace == ns)
                                && (names.is_empty()
                                    || r.name.as_ref().is_some_and(|n| names.contains(n)))
                        });
                        if used {
                            continue;
                        }
                        let qualified = if group.is_empty() {
                            resource.clone()
                        } else {
                            format!("{resource}.{group}")
                        };
                        let named = if names.is_empty() {
                            String::new()
                        } else {
                            format!(" [{}]", names.join(", "))
                        };
                        out.push(format!("{label}: {verb} {qualified}{named}"));
                    }
                }
            }
        }
    }
    out
}

/// Discovery and version paths, which every authenticated user may read.
fn is_discovery(path: &str) -> bool {
    [
        "/api", "/apis", "/version", "/openapi", "/healthz", "/livez", "/readyz",
    ]
    .iter()
    .any(|p| path == *p || path.starts_with(&format!("{p}/")))
}

/// Whether binding `b` names `sa` among its subjects.
fn binds(b: &Value, sa: &ServiceAccount) -> bool {
    let groups = sa.groups();
    b["subjects"].as_array().is_some_and(|subjects| {
        subjects.iter().any(|s| match s["kind"].as_str() {
            Some("ServiceAccount") => {
                s["name"] == sa.name.as_str() && s["namespace"] == sa.namespace.as_str()
            }
            Some("User") => s["name"] == sa.user().as_str(),
            Some("Group") => groups.iter().any(|g| s["name"] == g.as_str()),
            _ => false,
        })
    })
}

fn contains(list: &Value, want: &str) -> bool {
    list.as_array()
        .is_some_and(|l| l.iter().any(|x| x == "*" || x == want))
}

fn rule_allows(rule: &Value, req: &Request<'_>) -> bool {
    match req {
        Request::Resource {
            verb,
            group,
            resource,
            name,
            ..
        } => {
            let resource_ok = rule["resources"].as_array().is_some_and(|l| {
                l.iter().filter_map(Value::as_str).any(|r| {
                    r == "*"
                        || r == *resource
                        || resource
                            .split_once('/')
                            .is_some_and(|(_, sub)| r.strip_prefix("*/") == Some(sub))
                })
            });
            let names = rule["resourceNames"].as_array().filter(|l| !l.is_empty());
            let name_ok = names.is_none_or(|l| name.is_some_and(|n| l.iter().any(|x| x == n)));
            contains(&rule["verbs"], verb)
                && contains(&rule["apiGroups"], group)
                && resource_ok
                && name_ok
        }
        Request::NonResource { verb, path } => {
            contains(&rule["verbs"], verb)
                && rule["nonResourceURLs"].as_array().is_some_and(|l| {
                    l.iter().filter_map(Value::as_str).any(|u| {
                        u == *path || u.strip_suffix('*').is_some_and(|p| path.starts_with(p))
                    })
                })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn sa() -> ServiceAccount {
        ServiceAccount {
            namespace: "machineos".into(),
            name: "agent".into(),
        }
    }

    fn objects() -> Vec<Value> {
        vec![
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "nodes"},
            "rules": [
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get", "patch"]},
                {"apiGroups": [""], "resources": ["pods/eviction"], "verbs": ["create"]},
                {"nonResourceURLs": ["/metrics*"], "verbs": ["get"]},
            ]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
                "metadata": {"name": "nodes"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "nodes"},
                "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": "machineos"}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "Role",
                "metadata": {"name": "pull", "namespace": "machineos"},
                "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"],
                    "resourceNames": ["pull-secret"]}]}),
            json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "RoleBinding",
                "metadata": {"name": "pull", "namespace": "machineos"},
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pull"},
                "subjects": [{"kind": "Group", "name": "system:serviceaccounts:machineos"}]}),
        ]
    }

    fn res<'a>(
        verb: &'a str,
        group: &'a str,
        resource: &'a str,
        namespace: Option<&'a str>,
        name: Option<&'a str>,
    ) -> Request<'a> {
        Request::Resource {
            verb,
            group,
            resource,
            namespace,
            name,
        }
    }

    #[test]
    fn unused_grants_are_the_role_verbs_no_request_used() {
        let objs = objects();
        let used =
            |verb: &str, resource: &str, namespace: Option<&str>, name: Option<&str>| Allowed {
                sa: sa(),
                verb: verb.into(),
                group: String::new(),
                resource: resource.into(),
                namespace: namespace.map(str::to_owned),
                name: name.map(str::to_owned),
            };
        let all = [
            "ClusterRole nodes: get nodes",
            "ClusterRole nodes: patch nodes",
            "ClusterRole nodes: create pods/eviction",
            "Role machineos/pull: get secrets [pull-secret]",
        ];
        assert_eq!(unused_grants(&sa(), &[], objs.iter()), all);
        let requests = [
            used("get", "nodes", None, Some("n1")),
            // Another Secret, or the right one in another namespace, is not the grant's.
            used("get", "secrets", Some("machineos"), Some("other")),
            used("get", "secrets", Some("elsewhere"), Some("pull-secret")),
        ];
        assert_eq!(unused_grants(&sa(), &requests, objs.iter()), all[1..]);
        let other = ServiceAccount {
            namespace: "machineos".into(),
            name: "controller".into(),
        };
        let theirs = [Allowed {
            sa: other,
            ..used("patch", "nodes", None, Some("n1"))
        }];
        assert_eq!(unused_grants(&sa(), &theirs, objs.iter()), all);
    }

    #[test]
    fn the_decision_table() {
        let objs = objects();
        let ns = Some("machineos");
        let cases = [
            (res("get", "", "nodes", None, Some("n1")), true),
            (res("patch", "", "nodes", None, Some("n1")), true),
            (res("delete", "", "nodes", None, Some("n1")), false),
            (res("patch", "", "nodes/status", None, Some("n1")), false),
            (
                res("create", "", "pods/eviction", Some("default"), Some("p")),
                true,
            ),
            (res("delete", "", "pods", Some("default"), Some("p")), false),
            // resourceNames: the named Secret only, never the collection.
            (res("get", "", "secrets", ns, Some("pull-secret")), true),
            (res("get", "", "secrets", ns, Some("push-secret")), false),
            (res("list", "", "secrets", ns, None), false),
            // A RoleBinding grants in its namespace only.
            (
                res("get", "", "secrets", Some("other"), Some("pull-secret")),
                false,
            ),
            (res("get", "apps", "nodes", None, Some("n1")), false),
            (
                Request::NonResource {
                    verb: "get",
                    path: "/metrics/x",
                },
                true,
            ),
            (
                Request::NonResource {
                    verb: "post",
                    path: "/metrics",
                },
                false,
            ),
            (
                Request::NonResource {
                    verb: "get",
                    path: "/apis",
                },
                true,
            ),
            (
                Request::NonResource {
                    verb: "get",
                    path: "/logs",
                },
                false,
            ),
        ];
        for (req, want) in cases {
            assert_eq!(allowed(&sa(), &req, objs.iter()), want, "{req:?}");
        }
        // Another ServiceAccount, of another namespace: nothing but discovery.
        let other = ServiceAccount {
            namespace: "default".into(),
            name: "agent".into(),
        };
        assert!(!allowed(
            &other,
            &res("get", "", "nodes", None, Some("n1")),
            objs.iter()
        ));
        assert_eq!(other.user(), "system:serviceaccount:default:agent");
    }
}
