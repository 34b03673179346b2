//! How objects are named: a [`GroupResource`] (what a URL names) and an [`ObjectKey`]
//! (resource, namespace, name), whose order is a real server's list order; and which
//! endpoint of an object a write goes to ([`Subresource`]).

use std::fmt;

/// A group and a resource plural: what a URL names (`configmaps`, `jobs.batch`).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct GroupResource {
    /// The API group; empty for core.
    pub group: String,
    /// The resource plural (`configmaps`).
    pub resource: String,
}

impl GroupResource {
    /// `group`/`resource`.
    pub fn new(group: &str, resource: &str) -> GroupResource {
        GroupResource {
            group: group.to_string(),
            resource: resource.to_string(),
        }
    }
}

impl fmt::Display for GroupResource {
    /// Go's `GroupResource.String()`: `configmaps`, `jobs.batch`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.group.is_empty() {
            f.write_str(&self.resource)
        } else {
            write!(f, "{}.{}", self.resource, self.group)
        }
    }
}

/// Where an object lives: its resource, namespace (none for cluster scope) and name. The
/// store's order on keys is a real server's list order (by namespace, then name).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ObjectKey {
    /// The resource.
    pub gr: GroupResource,
    /// The namespace; `None` for cluster-scoped objects.
    pub namespace: Option<String>,
    /// The name.
    pub name: String,
}

/// Which endpoint a write goes to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Subresource {
    /// The object itself.
    Main,
    /// `/status`.
    Status,
}
