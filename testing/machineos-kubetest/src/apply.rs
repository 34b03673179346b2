//! Server-side apply and `metadata.managedFields`, as pure functions over JSON: the field
//! sets of field managers, the structured merge of an applied configuration into a live
//! object, conflicts, and the ownership bookkeeping of non-apply writes. The store wires
//! them into its writes in [`crate::store_apply`].
//!
//! What it follows — kube-apiserver's field manager
//! (`k8s.io/apimachinery/pkg/util/managedfields/internal`: `fieldmanager.go`,
//! `structuredmerge.go`, `managedfieldsupdater.go`, `stripmeta.go`, `conflict.go`,
//! `managedfields.go`) over sigs.k8s.io/structured-merge-diff (`fieldpath`, `typed`,
//! `merge/update.go`):
//!
//! * **Field sets** ([`FieldSet`]) are sets of paths; a path is a list of
//!   [`PathElement`]s: a field of a map (`f:name`), an item of a `map` list by its keys
//!   (`k:{"name":"x"}`), an item of a `set` list by its value (`v:"x"`), an index (`i:0`,
//!   only when an item cannot be keyed). [`FieldSet::to_fields_v1`] writes the `FieldsV1`
//!   JSON (members as `{}`, a member that also has children carries `".": {}`),
//!   [`FieldSet::from_fields_v1`] reads it back. Paths print as in conflicts:
//!   `.spec.containers[name="c"].image`, `.metadata.finalizers[="f"]`.
//! * **The field set of an applied object** ([`field_set`], SMD's `ToFieldSet`): every
//!   scalar, every atomic list or map as a whole, every item of a `map`/`set` list (the
//!   item itself and its fields), every key of a map that is not a declared field (a
//!   `map[string]…` entry), and every empty map or `null`.
//! * **Merge** ([`merge`], SMD's `Merge`): maps merge key by key; atomic lists, atomic
//!   maps and scalars are replaced by the applied value; `map` lists merge item by item by
//!   their keys, `set` lists as sets; items keep the order SMD gives them (live-only items
//!   stay where they were, shared and new items follow the applied order).
//! * **Apply** ([`apply`], SMD's `Updater.Apply`): merge, then the applier's entry
//!   becomes exactly the applied field set; fields it applied last time and omits now are
//!   removed from the object unless some manager (any operation) still owns them or
//!   something under them; then every other manager that owns a field whose value the
//!   apply changes (or adds) is a conflict: a 409 worded as kube-apiserver's
//!   (`Apply failed with 1 conflict: conflict with "mgr" using v1: .data.key`, causes of
//!   type `FieldManagerConflict`), unless `force`, which moves those fields to the
//!   applier. Fields the apply removes leave every owner.
//! * **Update** ([`update`], `Updater.Update` behind `managedFieldsUpdater`): a create, a
//!   PUT or a non-apply patch compares the live object with the new one; the fields it
//!   added or changed (maps it created count, as in SMD's `Compare`) leave every other
//!   manager and join the writer's `Update` entry (whose `time` is then set); the fields
//!   it removed leave every manager. A write that adds and changes nothing leaves the
//!   entries as they were.
//! * **Entries** ([`Managed`]): one per manager, operation and subresource (and per
//!   apiVersion for `Update`), sorted as kube-apiserver sorts them (operation, time,
//!   manager, apiVersion, subresource); entries whose set became empty are dropped; the
//!   fields kube-apiserver strips (`apiVersion`, `kind`, `metadata` itself and its
//!   `name`, `namespace`, `uid`, `creationTimestamp`, `selfLink`, `clusterName`,
//!   `generation`, `managedFields`, `resourceVersion`) are never owned.
//!
//! Types of lists and maps ([`Schema`]):
//! * custom resources: the CRD version's `openAPIV3Schema` ([`Schema::from_openapi`]):
//!   `properties` are declared fields, `additionalProperties` map entries,
//!   `x-kubernetes-list-type` `map` (keyed by `x-kubernetes-list-map-keys`, a missing key
//!   taking the key property's `default`), `set` and `atomic`, `x-kubernetes-map-type:
//!   atomic`; lists without a list type are atomic, as SMD reads an OpenAPI schema;
//!   `metadata` always gets the built-in ObjectMeta types below. Subtrees with
//!   `x-kubernetes-preserve-unknown-fields` and no properties are *deduced* as SMD deduces
//!   untyped values: maps merge (every key an undeclared entry), lists are atomic.
//! * built-in kinds ([`Schema::Builtin`]), a table by field name (written by hand: the
//!   OpenAPI schema kube-apiserver derives from Go types is not served here): `map` lists
//!   `containers`, `initContainers`, `ephemeralContainers`, `env`, `volumes`,
//!   `imagePullSecrets`, `resourceClaims` by `name`; `ports` by `containerPort` and
//!   `protocol` (default `TCP`); `volumeMounts` by `mountPath`; `volumeDevices` by
//!   `devicePath`; `conditions` by `type`; `ownerReferences` by `uid`; `hostAliases` and
//!   `podIPs` by `ip`; `topologySpreadConstraints` by `topologyKey` and
//!   `whenUnsatisfiable`; `finalizers` a `set`; every other list atomic; every map key a
//!   declared field.
//!
//! Simplifications, against the real field manager:
//! * the built-in table looks fields up by name wherever they are, so a Job's
//!   `status.conditions` (atomic on a real server) merge by `type`, and `map`-typed Go
//!   fields (`labels`, `data`) count their keys as declared fields — which changes
//!   nothing for their scalar values, the only kind they hold;
//! * an item of a `map` list missing a key without default is keyed by the keys it has
//!   (SMD rejects it), one that is not an object by its index; duplicate items are merged
//!   into the first (SMD tracks them separately);
//! * pruning keeps an item of a list that another manager owns something inside of, with
//!   its key fields, and removes only what nobody owns (SMD's add-back passes end in the
//!   same place for fields, and may drop such an item);
//! * an applied `null` is owned and merged as the absence of the field (the typed
//!   decoding of a real server drops it the same way for built-in kinds);
//! * the ten-`Update`-managers cap (`capmanagers.go`), the `kubectl.kubernetes.io/
//!   last-applied-configuration` upgrade and conversion between versions of managed sets
//!   are not done.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::error::ApiError;

/// One step of a field path.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum PathElement {
    /// A field of a map (`f:name`).
    Field(String),
    /// An item of a `map` list: its key fields and their values as canonical JSON, sorted
    /// by name (`k:{"name":"x"}`).
    Key(Vec<(String, String)>),
    /// An item of a `set` list: its value as canonical JSON (`v:"x"`).
    Value(String),
    /// An item by index (`i:0`).
    Index(usize),
}

/// A path: the elements from the object's root.
pub type Path = Vec<PathElement>;

fn go_value(json_text: &str) -> String {
    match serde_json::from_str::<Value>(json_text) {
        Ok(Value::String(s)) => machineos_diagnostics::go_quote(&s),
        _ => json_text.to_string(),
    }
}

impl std::fmt::Display for PathElement {
    /// SMD's `PathElement.String()`: `.name`, `[name="x",port=80]`, `[="x"]`, `[0]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PathElement::Field(n) => write!(f, ".{n}"),
            PathElement::Key(kv) => {
                let parts: Vec<String> = kv
                    .iter()
                    .map(|(k, v)| format!("{k}={}", go_value(v)))
                    .collect();
                write!(f, "[{}]", parts.join(","))
            }
            PathElement::Value(v) => write!(f, "[={}]", go_value(v)),
            PathElement::Index(i) => write!(f, "[{i}]"),
        }
    }
}

impl PathElement {
    /// The `FieldsV1` key: `f:name`, `k:{"name":"x"}`, `v:"x"`, `i:0`.
    pub fn to_key(&self) -> String {
        match self {
            PathElement::Field(n) => format!("f:{n}"),
            PathElement::Key(kv) => {
                let m: Map<String, Value> = kv
                    .iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            serde_json::from_str(v).unwrap_or(Value::String(v.clone())),
                        )
                    })
                    .collect();
                format!("k:{}", Value::Object(m))
            }
            PathElement::Value(v) => format!("v:{v}"),
            PathElement::Index(i) => format!("i:{i}"),
        }
    }

    /// Parses a `FieldsV1` key; `Ok(None)` for a type this version does not know (ignored,
    /// as SMD ignores them).
    pub fn from_key(key: &str) -> Result<Option<PathElement>, String> {
        let Some((ty, rest)) = key.split_once(':') else {
            return Err(format!("invalid path element {key:?}"));
        };
        match ty {
            "f" => Ok(Some(PathElement::Field(rest.to_string()))),
            "k" => {
                let Ok(Value::Object(m)) = serde_json::from_str::<Value>(rest) else {
                    return Err(format!("invalid key path element {key:?}"));
                };
                let mut kv: Vec<(String, String)> =
                    m.iter().map(|(k, v)| (k.clone(), canonical(v))).collect();
                kv.sort();
                Ok(Some(PathElement::Key(kv)))
            }
            "v" => serde_json::from_str::<Value>(rest)
                .map(|v| Some(PathElement::Value(canonical(&v))))
                .map_err(|e| format!("invalid value path element {key:?}: {e}")),
            "i" => rest
                .parse()
                .map(|i| Some(PathElement::Index(i)))
                .map_err(|e| format!("invalid index path element {key:?}: {e}")),
            _ => Ok(None),
        }
    }
}

/// Canonical JSON text of a value (compact, keys in stored order).
fn canonical(v: &Value) -> String {
    v.to_string()
}

/// A path as conflicts print it: `.spec.containers[name="c"].image`.
pub fn path_string(p: &[PathElement]) -> String {
    p.iter().map(ToString::to_string).collect()
}

/// A set of field paths (a manager's fields).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSet(BTreeSet<Path>);

#[derive(Default)]
struct Tree {
    member: bool,
    children: BTreeMap<PathElement, Tree>,
}

impl Tree {
    fn to_json(&self, include_self: bool) -> Value {
        let mut m = Map::new();
        for (pe, child) in &self.children {
            let v = if child.children.is_empty() {
                json!({})
            } else {
                child.to_json(child.member)
            };
            m.insert(pe.to_key(), v);
        }
        if include_self && !m.is_empty() {
            m.insert(".".into(), json!({}));
        }
        Value::Object(m)
    }
}

impl FieldSet {
    /// The empty set.
    pub fn new() -> FieldSet {
        FieldSet::default()
    }

    /// Adds a path.
    pub fn insert(&mut self, p: Path) {
        self.0.insert(p);
    }

    /// Whether `p` is in the set.
    pub fn contains(&self, p: &[PathElement]) -> bool {
        self.0.contains(p)
    }

    /// Whether the set holds `p` or a path under it.
    pub fn has_prefix(&self, p: &[PathElement]) -> bool {
        self.0
            .range(p.to_vec()..)
            .next()
            .is_some_and(|q| q.starts_with(p))
    }

    /// Whether the set is empty.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The number of paths.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// The paths, in order.
    pub fn iter(&self) -> impl Iterator<Item = &Path> {
        self.0.iter()
    }

    /// `self ∪ other`.
    pub fn union(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.union(&other.0).cloned().collect())
    }

    /// `self ∖ other`.
    pub fn difference(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.difference(&other.0).cloned().collect())
    }

    /// `self ∩ other`.
    pub fn intersection(&self, other: &FieldSet) -> FieldSet {
        FieldSet(self.0.intersection(&other.0).cloned().collect())
    }

    /// The paths `keep` accepts.
    pub fn filter(&self, keep: impl Fn(&Path) -> bool) -> FieldSet {
        FieldSet(self.0.iter().filter(|p| keep(p)).cloned().collect())
    }

    /// The `FieldsV1` JSON of the set.
    pub fn to_fields_v1(&self) -> Value {
        let mut root = Tree::default();
        for p in &self.0 {
            let mut t = &mut root;
            for pe in p {
                t = t.children.entry(pe.clone()).or_default();
            }
            t.member = true;
        }
        root.to_json(false)
    }

    /// Reads a `FieldsV1` JSON object.
    pub fn from_fields_v1(v: &Value) -> Result<FieldSet, String> {
        fn walk(v: &Value, path: &mut Path, out: &mut FieldSet) -> Result<(), String> {
            let Value::Object(m) = v else {
                return Err("a FieldsV1 node must be an object".into());
            };
            if m.is_empty() {
                out.insert(path.clone());
                return Ok(());
            }
            for (k, child) in m {
                if k == "." {
                    out.insert(path.clone());
                    continue;
                }
                let Some(pe) = PathElement::from_key(k)? else {
                    continue;
                };
                path.push(pe);
                walk(child, path, out)?;
                path.pop();
            }
            Ok(())
        }
        let mut out = FieldSet::new();
        let Value::Object(m) = v else {
            return Err("fieldsV1 must be an object".into());
        };
        for (k, child) in m {
            let Some(pe) = PathElement::from_key(k)? else {
                continue;
            };
            let mut path = vec![pe];
            walk(child, &mut path, &mut out)?;
        }
        Ok(out)
    }
}

/// How a list merges.
#[derive(Debug, Clone, PartialEq)]
pub enum ListType {
    /// Replaced whole (`x-kubernetes-list-type: atomic`, and every list without a type).
    Atomic,
    /// Scalars merged as a set.
    Set,
    /// Maps merged item by item by these key fields; `defaults` stand in for missing keys.
    Map {
        /// The key fields.
        keys: Vec<String>,
        /// Default values of key fields.
        defaults: Vec<(String, Value)>,
    },
}

/// The type of a value, as far as merging needs it.
#[derive(Debug, Clone, PartialEq)]
pub enum Schema {
    /// Untyped: maps merge with every key an undeclared entry, lists are atomic.
    Deduced,
    /// A built-in kind's value: maps merge with declared fields, lists by the table of the
    /// module documentation.
    Builtin,
    /// A scalar (or anything a schema does not let merge).
    Scalar,
    /// A map.
    Object {
        /// Declared fields.
        fields: BTreeMap<String, Schema>,
        /// The type of other keys (`additionalProperties`); `None`: deduced.
        additional: Option<Box<Schema>>,
        /// `x-kubernetes-map-type: atomic`.
        atomic: bool,
    },
    /// A list.
    List {
        /// How it merges.
        list: ListType,
        /// The type of its items.
        items: Box<Schema>,
    },
}

fn builtin_list(field: &str) -> Option<ListType> {
    let map = |keys: &[&str]| ListType::Map {
        keys: keys.iter().map(|k| k.to_string()).collect(),
        defaults: vec![],
    };
    Some(match field {
        "containers"
        | "initContainers"
        | "ephemeralContainers"
        | "env"
        | "volumes"
        | "imagePullSecrets"
        | "resourceClaims" => map(&["name"]),
        "ports" => ListType::Map {
            keys: vec!["containerPort".into(), "protocol".into()],
            defaults: vec![("protocol".into(), json!("TCP"))],
        },
        "volumeMounts" => map(&["mountPath"]),
        "volumeDevices" => map(&["devicePath"]),
        "conditions" => map(&["type"]),
        "ownerReferences" => map(&["uid"]),
        "hostAliases" | "podIPs" => map(&["ip"]),
        "topologySpreadConstraints" => map(&["topologyKey", "whenUnsatisfiable"]),
        "finalizers" => ListType::Set,
        _ => return None,
    })
}

impl Schema {
    /// The type of a CRD's `openAPIV3Schema` node (see the module documentation).
    pub fn from_openapi(v: &Value) -> Schema {
        let s = |k: &str| v.get(k).and_then(Value::as_str);
        let flag = |k: &str| v.get(k).and_then(Value::as_bool) == Some(true);
        let ty = s("type");
        if ty == Some("array") || (ty.is_none() && v.get("items").is_some()) {
            let items_v = v.get("items").cloned().unwrap_or(json!({}));
            let list = match s("x-kubernetes-list-type") {
                Some("set") => ListType::Set,
                Some("map") => {
                    let keys = crate::json::strings_at(v, "/x-kubernetes-list-map-keys");
                    let defaults = keys
                        .iter()
                        .filter_map(|k| {
                            items_v
                                .pointer(&format!("/properties/{k}/default"))
                                .map(|d| (k.clone(), d.clone()))
                        })
                        .collect();
                    ListType::Map { keys, defaults }
                }
                _ => ListType::Atomic,
            };
            return Schema::List {
                list,
                items: Box::new(Schema::from_openapi(&items_v)),
            };
        }
        let props = v.get("properties").and_then(Value::as_object);
        let additional = v.get("additionalProperties");
        if ty == Some("object") || props.is_some() || additional.is_some() {
            if props.is_none() && additional.is_none() {
                return if s("x-kubernetes-map-type") == Some("atomic") {
                    Schema::Scalar
                } else {
                    Schema::Deduced
                };
            }
            let fields = props
                .map(|p| {
                    p.iter()
                        .map(|(k, pv)| (k.clone(), Schema::from_openapi(pv)))
                        .collect()
                })
                .unwrap_or_default();
            let additional = match additional {
                Some(a @ Value::Object(_)) => Some(Box::new(Schema::from_openapi(a))),
                _ => None,
            };
            return Schema::Object {
                fields,
                additional,
                atomic: s("x-kubernetes-map-type") == Some("atomic"),
            };
        }
        if flag("x-kubernetes-preserve-unknown-fields") && ty.is_none() {
            return Schema::Deduced;
        }
        match ty {
            Some(_) => Schema::Scalar,
            None if flag("x-kubernetes-int-or-string") => Schema::Scalar,
            None => Schema::Deduced,
        }
    }

    /// The type of a custom resource: its CRD version's `openAPIV3Schema`, with
    /// `metadata` typed as the built-in ObjectMeta.
    pub fn custom_resource(open_api_v3_schema: &Value) -> Schema {
        let mut s = Schema::from_openapi(open_api_v3_schema);
        match &mut s {
            Schema::Object { fields, atomic, .. } => {
                *atomic = false;
                fields.insert("metadata".into(), Schema::Builtin);
            }
            _ => {
                s = Schema::Object {
                    fields: BTreeMap::from([("metadata".into(), Schema::Builtin)]),
                    additional: None,
                    atomic: false,
                }
            }
        }
        s
    }

    /// The type of map entry `name` and whether it is a declared field.
    fn field(&self, name: &str) -> (Cow<'_, Schema>, bool) {
        match self {
            Schema::Builtin => (
                Cow::Owned(match builtin_list(name) {
                    Some(list) => Schema::List {
                        list,
                        items: Box::new(Schema::Builtin),
                    },
                    None => Schema::Builtin,
                }),
                true,
            ),
            Schema::Object {
                fields, additional, ..
            } => match (fields.get(name), additional) {
                (Some(s), _) => (Cow::Borrowed(s), true),
                (None, Some(a)) => (Cow::Borrowed(a.as_ref()), false),
                (None, None) => (Cow::Owned(Schema::Deduced), false),
            },
            _ => (Cow::Owned(Schema::Deduced), false),
        }
    }

    fn map_atomic(&self) -> bool {
        match self {
            Schema::Object { atomic, .. } => *atomic,
            Schema::Scalar | Schema::List { .. } => true,
            Schema::Deduced | Schema::Builtin => false,
        }
    }

    fn list_type(&self) -> &ListType {
        const ATOMIC: &ListType = &ListType::Atomic;
        match self {
            Schema::List { list, .. } => list,
            _ => ATOMIC,
        }
    }

    fn items(&self) -> &Schema {
        match self {
            Schema::List { items, .. } => items,
            _ => &Schema::Deduced,
        }
    }

    /// The path element of item `i` of a list of this type.
    fn item_element(&self, i: usize, item: &Value) -> PathElement {
        match (self.list_type(), item) {
            (ListType::Set, v) => PathElement::Value(canonical(v)),
            (ListType::Map { keys, defaults }, Value::Object(m)) => {
                let mut kv: Vec<(String, String)> = keys
                    .iter()
                    .filter_map(|k| {
                        m.get(k)
                            .or_else(|| defaults.iter().find(|(d, _)| d == k).map(|(_, v)| v))
                            .map(|v| (k.clone(), canonical(v)))
                    })
                    .collect();
                if kv.is_empty() {
                    return PathElement::Index(i);
                }
                kv.sort();
                PathElement::Key(kv)
            }
            _ => PathElement::Index(i),
        }
    }
}

/// What a value is, for merging: a leaf (scalar, atomic, or empty on both sides), a map
/// or an associative list.
#[derive(PartialEq)]
enum Shape {
    Leaf,
    Map,
    List,
}

fn is_empty_container(v: &Value) -> bool {
    match v {
        Value::Object(m) => m.is_empty(),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn shape(s: &Schema, l: Option<&Value>, r: Option<&Value>) -> Shape {
    let both_empty = l.is_none_or(is_empty_container) && r.is_none_or(is_empty_container);
    let kind = |v: &Value| match v {
        Value::Object(_) => 1,
        Value::Array(_) => 2,
        _ => 0,
    };
    let kinds: Vec<u8> = [l, r].into_iter().flatten().map(kind).collect();
    if both_empty || kinds.windows(2).any(|w| w[0] != w[1]) {
        return Shape::Leaf;
    }
    match kinds.first() {
        Some(1) if !s.map_atomic() => Shape::Map,
        Some(2) if *s.list_type() != ListType::Atomic => Shape::List,
        _ => Shape::Leaf,
    }
}

/// The items of a list by their path elements (the first of duplicates), in list order.
fn index_items<'v>(s: &Schema, l: Option<&'v Value>) -> Vec<(PathElement, &'v Value)> {
    let mut out: Vec<(PathElement, &Value)> = Vec::new();
    let mut seen = BTreeSet::new();
    if let Some(Value::Array(a)) = l {
        for (i, item) in a.iter().enumerate() {
            let pe = s.item_element(i, item);
            if seen.insert(pe.clone()) {
                out.push((pe, item));
            }
        }
    }
    out
}

/// The field set of an applied object (SMD's `ToFieldSet`; see the module documentation).
pub fn field_set(s: &Schema, v: &Value) -> FieldSet {
    fn walk(s: &Schema, v: &Value, path: &mut Path, out: &mut FieldSet) {
        match v {
            Value::Object(m) if !s.map_atomic() => {
                for (k, val) in m {
                    let (cs, declared) = s.field(k);
                    path.push(PathElement::Field(k.clone()));
                    walk(&cs, val, path, out);
                    if val.is_null() || (val.is_object() && is_empty_container(val)) || !declared {
                        out.insert(path.clone());
                    }
                    path.pop();
                }
            }
            Value::Array(_) if *s.list_type() != ListType::Atomic => {
                for (pe, item) in index_items(s, Some(v)) {
                    path.push(pe);
                    walk(s.items(), item, path, out);
                    out.insert(path.clone());
                    path.pop();
                }
            }
            _ => out.insert(path.clone()),
        }
    }
    let mut out = FieldSet::new();
    if let Value::Object(_) = v {
        walk(s, v, &mut Vec::new(), &mut out);
    }
    out
}

/// What changed between two objects (SMD's `Comparison`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Comparison {
    /// Fields (and maps, lists and items) the new object adds.
    pub added: FieldSet,
    /// Fields whose value changed.
    pub modified: FieldSet,
    /// Fields (and maps, lists and items) the new object removes.
    pub removed: FieldSet,
}

impl Comparison {
    /// Whether nothing changed.
    pub fn is_empty(&self) -> bool {
        self.added.is_empty() && self.modified.is_empty() && self.removed.is_empty()
    }

    fn filter(self, keep: &dyn Fn(&Path) -> bool) -> Comparison {
        Comparison {
            added: self.added.filter(keep),
            modified: self.modified.filter(keep),
            removed: self.removed.filter(keep),
        }
    }
}

/// Compares `live` with `new` (SMD's `Compare`).
pub fn compare(s: &Schema, live: &Value, new: &Value) -> Comparison {
    fn walk(s: &Schema, l: Option<&Value>, r: Option<&Value>, path: &mut Path, c: &mut Comparison) {
        match shape(s, l, r) {
            Shape::Leaf => {
                match (l, r) {
                    (None, Some(_)) => c.added.insert(path.clone()),
                    (Some(_), None) => c.removed.insert(path.clone()),
                    (Some(a), Some(b)) if a != b => c.modified.insert(path.clone()),
                    _ => {}
                }
                return;
            }
            Shape::Map => {
                let lm = l.and_then(Value::as_object);
                let rm = r.and_then(Value::as_object);
                let mut keys: Vec<&String> = lm.into_iter().flat_map(|m| m.keys()).collect();
                for k in rm.into_iter().flat_map(|m| m.keys()) {
                    if !lm.is_some_and(|m| m.contains_key(k)) {
                        keys.push(k);
                    }
                }
                for k in keys {
                    let (cs, _) = s.field(k);
                    path.push(PathElement::Field(k.clone()));
                    walk(
                        &cs,
                        lm.and_then(|m| m.get(k)),
                        rm.and_then(|m| m.get(k)),
                        path,
                        c,
                    );
                    path.pop();
                }
            }
            Shape::List => {
                let li = index_items(s, l);
                let ri = index_items(s, r);
                let mut pes: Vec<&PathElement> = li.iter().map(|(pe, _)| pe).collect();
                for (pe, _) in &ri {
                    if !li.iter().any(|(p, _)| p == pe) {
                        pes.push(pe);
                    }
                }
                for pe in pes {
                    let lv = li.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                    let rv = ri.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                    path.push(pe.clone());
                    walk(s.items(), lv, rv, path, c);
                    path.pop();
                }
            }
        }
        if l.is_none() {
            c.added.insert(path.clone());
        } else if r.is_none() {
            c.removed.insert(path.clone());
        }
    }
    let mut c = Comparison::default();
    walk(s, Some(live), Some(new), &mut Vec::new(), &mut c);
    c.added = c.added.filter(|p| !p.is_empty());
    c
}

/// Merges the applied configuration `config` into `live` (SMD's `Merge`; see the module
/// documentation).
pub fn merge(s: &Schema, live: &Value, config: &Value) -> Value {
    fn walk(s: &Schema, l: Option<&Value>, r: Option<&Value>) -> Option<Value> {
        let (Some(lv), Some(rv)) = (l, r) else {
            return r.or(l).cloned();
        };
        match shape(s, l, r) {
            Shape::Leaf => Some(rv.clone()),
            Shape::Map => {
                let (Value::Object(lm), Value::Object(rm)) = (lv, rv) else {
                    return Some(rv.clone());
                };
                let mut out = Map::new();
                for (k, v) in lm {
                    let (cs, _) = s.field(k);
                    match rm.get(k) {
                        Some(Value::Null) => {}
                        Some(r) => {
                            if let Some(m) = walk(&cs, Some(v), Some(r)) {
                                out.insert(k.clone(), m);
                            }
                        }
                        None => {
                            out.insert(k.clone(), v.clone());
                        }
                    }
                }
                for (k, v) in rm {
                    if !lm.contains_key(k) && !v.is_null() {
                        out.insert(k.clone(), v.clone());
                    }
                }
                Some(Value::Object(out))
            }
            Shape::List => {
                let li = index_items(s, l);
                let ri = index_items(s, r);
                let in_l = |pe: &PathElement| li.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                let in_r = |pe: &PathElement| ri.iter().find(|(p, _)| p == pe).map(|(_, v)| *v);
                // SMD's order: live-only items stay where they were, shared items follow
                // the applied order, new items come at their applied position.
                let mut shared = ri.iter().filter(|(pe, _)| in_l(pe).is_some());
                let mut next_shared = shared.next().map(|(pe, _)| pe);
                let mut out = Vec::new();
                let (mut i, mut j) = (0, 0);
                while i < li.len() || j < ri.len() {
                    if i < li.len() && j < ri.len() {
                        let pe = &li[i].0;
                        if *pe == ri[j].0 {
                            out.extend(walk(s.items(), Some(li[i].1), Some(ri[j].1)));
                            i += 1;
                            j += 1;
                            next_shared = shared.next().map(|(pe, _)| pe);
                            continue;
                        }
                        if in_r(pe).is_some() && next_shared.is_some_and(|n| n != pe) {
                            i += 1;
                            continue;
                        }
                    }
                    if i < li.len() && in_r(&li[i].0).is_none() {
                        out.push(li[i].1.clone());
                        i += 1;
                        continue;
                    }
                    if j < ri.len() {
                        let pe = &ri[j].0;
                        out.extend(walk(s.items(), in_l(pe), Some(ri[j].1)));
                        j += 1;
                        if next_shared == Some(pe) {
                            next_shared = shared.next().map(|(pe, _)| pe);
                        }
                    } else {
                        // Only shared live items remain, all merged already.
                        i += 1;
                    }
                }
                Some(Value::Array(out))
            }
        }
    }
    walk(s, Some(live), Some(config)).unwrap_or(Value::Null)
}

/// Removes the paths of `set` from `v`; maps and lists emptied by the removal go too.
pub fn remove_fields(s: &Schema, v: &mut Value, set: &FieldSet) {
    fn walk(s: &Schema, v: &mut Value, path: &mut Path, set: &FieldSet) {
        match v {
            Value::Object(m) if !s.map_atomic() => {
                let keys: Vec<String> = m.keys().cloned().collect();
                for k in keys {
                    path.push(PathElement::Field(k.clone()));
                    if set.contains(path) {
                        m.remove(&k);
                    } else if set.has_prefix(path)
                        && let Some(child) = m.get_mut(&k)
                    {
                        let had = !is_empty_container(child);
                        let (cs, _) = s.field(&k);
                        walk(&cs, child, path, set);
                        if had && is_empty_container(child) {
                            m.remove(&k);
                        }
                    }
                    path.pop();
                }
            }
            Value::Array(a) if *s.list_type() != ListType::Atomic => {
                let items = std::mem::take(a);
                for (i, mut item) in items.into_iter().enumerate() {
                    path.push(s.item_element(i, &item));
                    if !set.contains(path) {
                        if set.has_prefix(path) {
                            walk(s.items(), &mut item, path, set);
                        }
                        a.push(item);
                    }
                    path.pop();
                }
            }
            _ => {}
        }
    }
    walk(s, v, &mut Vec::new(), set);
}

/// `Apply` or `Update`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Operation {
    /// Server-side apply.
    Apply,
    /// Create, update or non-apply patch.
    Update,
}

impl Operation {
    fn as_str(self) -> &'static str {
        match self {
            Operation::Apply => "Apply",
            Operation::Update => "Update",
        }
    }
}

/// Who writes: a manager, its operation, the apiVersion written and the subresource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Manager {
    /// The manager's name (`fieldManager`).
    pub name: String,
    /// The operation.
    pub operation: Operation,
    /// The apiVersion written (`v1`, `group/v1`).
    pub api_version: String,
    /// The subresource (`status`), empty for the main resource.
    pub subresource: String,
}

impl Manager {
    /// Whether `e` is this manager's entry (apiVersion counts for `Update` only).
    fn owns(&self, e: &Entry) -> bool {
        e.manager == self.name
            && e.operation == self.operation
            && e.subresource == self.subresource
            && (self.operation == Operation::Apply || e.api_version == self.api_version)
    }
}

/// One `metadata.managedFields` entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// `manager`.
    pub manager: String,
    /// `operation`.
    pub operation: Operation,
    /// `apiVersion`.
    pub api_version: String,
    /// `time`.
    pub time: Option<String>,
    /// `subresource` (empty when absent).
    pub subresource: String,
    /// `fieldsV1`.
    pub fields: FieldSet,
}

impl Entry {
    /// How conflicts name the manager (`printManager` in `conflict.go`): `"mgr"` for an
    /// applier, `"mgr" using v1` for an updater, with `with subresource "status"` when
    /// it wrote a subresource.
    pub fn display(&self) -> String {
        let mut s = machineos_diagnostics::go_quote(&self.manager);
        if !self.subresource.is_empty() {
            s = format!(
                "{s} with subresource {}",
                machineos_diagnostics::go_quote(&self.subresource)
            );
        }
        if self.operation == Operation::Update {
            s = format!("{s} using {}", self.api_version);
        }
        s
    }
}

/// An object's `metadata.managedFields`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Managed(pub Vec<Entry>);

impl Managed {
    /// Decodes `metadata.managedFields` (absent or `null`: none), failing as
    /// `DecodeManagedFields` does on an entry without a valid operation, apiVersion or
    /// fieldsType.
    pub fn decode(v: Option<&Value>) -> Result<Managed, String> {
        let Some(v) = v.filter(|v| !v.is_null()) else {
            return Ok(Managed::default());
        };
        let Value::Array(a) = v else {
            return Err("managedFields must be a list".into());
        };
        let mut out = Vec::new();
        for (i, e) in a.iter().enumerate() {
            let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let operation = match s("operation").as_str() {
                "Apply" => Operation::Apply,
                "Update" => Operation::Update,
                _ => return Err("operation must be `Apply` or `Update`".into()),
            };
            if s("apiVersion").is_empty() {
                return Err("apiVersion must not be empty".into());
            }
            match s("fieldsType").as_str() {
                "FieldsV1" => {}
                "" => return Err(format!("missing fieldsType in managed fields entry {i}")),
                t => {
                    return Err(format!(
                        "invalid fieldsType {t:?} in managed fields entry {i}"
                    ));
                }
            }
            let fields = match e.get("fieldsV1") {
                Some(f) => FieldSet::from_fields_v1(f)?,
                None => FieldSet::new(),
            };
            out.push(Entry {
                manager: s("manager"),
                operation,
                api_version: s("apiVersion"),
                time: e.get("time").and_then(Value::as_str).map(str::to_string),
                subresource: s("subresource"),
                fields,
            });
        }
        Ok(Managed(out))
    }

    /// The `metadata.managedFields` JSON, entries sorted as kube-apiserver sorts them;
    /// `None` when there are none.
    pub fn encode(&self) -> Option<Value> {
        if self.0.is_empty() {
            return None;
        }
        let mut entries: Vec<&Entry> = self.0.iter().collect();
        entries.sort_by(|p, q| {
            (
                p.operation,
                &p.time,
                &p.manager,
                &p.api_version,
                &p.subresource,
            )
                .cmp(&(
                    q.operation,
                    &q.time,
                    &q.manager,
                    &q.api_version,
                    &q.subresource,
                ))
        });
        Some(Value::Array(
            entries
                .into_iter()
                .map(|e| {
                    let mut m = Map::new();
                    m.insert("manager".into(), json!(e.manager));
                    m.insert("operation".into(), json!(e.operation.as_str()));
                    m.insert("apiVersion".into(), json!(e.api_version));
                    if let Some(t) = &e.time {
                        m.insert("time".into(), json!(t));
                    }
                    m.insert("fieldsType".into(), json!("FieldsV1"));
                    m.insert("fieldsV1".into(), e.fields.to_fields_v1());
                    if !e.subresource.is_empty() {
                        m.insert("subresource".into(), json!(e.subresource));
                    }
                    Value::Object(m)
                })
                .collect(),
        ))
    }
}

/// Whether a path is one kube-apiserver never lets a manager own (`stripmeta.go`).
pub fn is_stripped(p: &[PathElement]) -> bool {
    let f = |pe: &PathElement, name: &str| matches!(pe, PathElement::Field(n) if n == name);
    match p {
        [a] => f(a, "apiVersion") || f(a, "kind") || f(a, "metadata"),
        [m, x] if f(m, "metadata") => [
            "name",
            "namespace",
            "creationTimestamp",
            "selfLink",
            "uid",
            "clusterName",
            "generation",
            "managedFields",
            "resourceVersion",
        ]
        .iter()
        .any(|n| f(x, n)),
        _ => false,
    }
}

/// Which fields a write may own: kube-apiserver's reset fields per endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Everything.
    All,
    /// Everything but `status` (the main endpoint of a kind with a status subresource).
    NotStatus,
    /// Only `status` (the `/status` subresource).
    Status,
}

impl Scope {
    fn keeps(self, p: &Path) -> bool {
        let status = matches!(p.first(), Some(PathElement::Field(f)) if f == "status");
        match self {
            Scope::All => true,
            Scope::NotStatus => !status,
            Scope::Status => status,
        }
    }
}

fn without_managed_fields(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(Value::Object(m)) = v.get_mut("metadata") {
        m.remove("managedFields");
    }
    v
}

/// A non-apply write by `who` changed `live` into `new`: the managers' entries after it
/// (see the module documentation). `live` is `{}` for a create.
pub fn update(
    s: &Schema,
    live: &Value,
    new: &Value,
    managed: &mut Managed,
    who: &Manager,
    scope: Scope,
    now: &str,
) {
    let cmp = compare(
        s,
        &without_managed_fields(live),
        &without_managed_fields(new),
    )
    .filter(&|p| scope.keeps(p));
    let changed = cmp.added.union(&cmp.modified);
    for e in &mut managed.0 {
        e.fields = e.fields.difference(&changed).difference(&cmp.removed);
    }
    let mine = changed.filter(|p| !is_stripped(p));
    if !mine.is_empty() {
        match managed.0.iter_mut().find(|e| who.owns(e)) {
            Some(e) => {
                e.fields = e.fields.union(&mine);
                e.time = Some(now.to_string());
            }
            None => managed.0.push(Entry {
                manager: who.name.clone(),
                operation: who.operation,
                api_version: who.api_version.clone(),
                time: Some(now.to_string()),
                subresource: who.subresource.clone(),
                fields: mine,
            }),
        }
    }
    managed.0.retain(|e| !e.fields.is_empty());
}

/// One manager's fields in a conflict.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conflict {
    /// The manager as conflicts print it ([`Entry::display`]).
    pub manager: String,
    /// The conflicting path (`.data.key`).
    pub path: String,
}

/// The 409 of conflicting fields, worded as `conflict.go`'s `NewConflictError`.
pub fn conflict_error(conflicts: Vec<Conflict>) -> ApiError {
    let message = match conflicts.as_slice() {
        [c] => format!(
            "Apply failed with 1 conflict: conflict with {}: {}",
            c.manager, c.path
        ),
        _ => {
            let mut by: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
            for c in &conflicts {
                by.entry(&c.manager).or_default().push(&c.path);
            }
            let mut lines = Vec::new();
            for (m, paths) in by {
                lines.push(format!("conflicts with {m}:"));
                lines.extend(paths.iter().map(|p| format!("- {p}")));
            }
            format!(
                "Apply failed with {} conflicts: {}",
                conflicts.len(),
                lines.join("\n")
            )
        }
    };
    ApiError::ApplyConflict {
        message,
        causes: conflicts
            .into_iter()
            .map(|c| (format!("conflict with {}", c.manager), c.path))
            .collect(),
    }
}

/// Server-side apply of `config` by `who` onto `live` (`{}` when the object does not
/// exist): the merged object and the managers' entries after it, or the 409 of its
/// conflicts (see the module documentation).
#[allow(clippy::too_many_arguments)]
pub fn apply(
    s: &Schema,
    live: &Value,
    config: &Value,
    managed: &mut Managed,
    who: &Manager,
    force: bool,
    scope: Scope,
    now: &str,
) -> Result<Value, ApiError> {
    let live = without_managed_fields(live);
    let mut merged = merge(s, &live, config);
    let set = field_set(s, config).filter(|p| scope.keeps(p) && !is_stripped(p));
    let at = match managed.0.iter().position(|e| who.owns(e)) {
        Some(i) => i,
        None => {
            managed.0.push(Entry {
                manager: who.name.clone(),
                operation: Operation::Apply,
                api_version: who.api_version.clone(),
                time: None,
                subresource: who.subresource.clone(),
                fields: FieldSet::new(),
            });
            managed.0.len() - 1
        }
    };
    let last = std::mem::replace(&mut managed.0[at].fields, set);
    managed.0[at].api_version = who.api_version.clone();
    // Prune what this manager applied last time, applies no more, and nobody owns.
    let owned = managed
        .0
        .iter()
        .fold(FieldSet::new(), |acc, e| acc.union(&e.fields));
    let prune = last.filter(|p| !owned.has_prefix(p) && !is_item_key(p));
    remove_fields(s, &mut merged, &prune);
    let cmp = compare(s, &live, &merged).filter(&|p| scope.keeps(p));
    let changed = cmp.added.union(&cmp.modified);
    let mut conflicts = Vec::new();
    for (i, e) in managed.0.iter().enumerate() {
        if i != at {
            for p in e.fields.intersection(&changed).iter() {
                conflicts.push((e.display(), path_string(p)));
            }
        }
    }
    if !force && !conflicts.is_empty() {
        conflicts.sort();
        return Err(conflict_error(
            conflicts
                .into_iter()
                .map(|(manager, path)| Conflict { manager, path })
                .collect(),
        ));
    }
    for (i, e) in managed.0.iter_mut().enumerate() {
        if i != at {
            e.fields = e.fields.difference(&changed).difference(&cmp.removed);
        } else if !cmp.is_empty() {
            e.time = Some(now.to_string());
        }
    }
    managed.0.retain(|e| !e.fields.is_empty());
    Ok(merged)
}

/// Whether `p` is a key field of a `map` list item (removed only with the item).
fn is_item_key(p: &[PathElement]) -> bool {
    match p {
        [.., PathElement::Key(kv), PathElement::Field(f)] => kv.iter().any(|(k, _)| k == f),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const T0: &str = "2024-01-01T00:00:00Z";
    const T1: &str = "2024-01-01T00:01:00Z";

    fn who(name: &str, op: Operation) -> Manager {
        Manager {
            name: name.into(),
            operation: op,
            api_version: "v1".into(),
            subresource: String::new(),
        }
    }

    fn owned(set: &FieldSet) -> Value {
        set.filter(|p| !is_stripped(p)).to_fields_v1()
    }

    fn cm(data: Value) -> Value {
        json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": data})
    }

    /// `manager` applies `config` over `live`: no force, every field in scope, at T1.
    fn ssa(
        s: &Schema,
        live: &Value,
        config: &Value,
        m: &mut Managed,
        manager: &str,
    ) -> Result<Value, ApiError> {
        let who = who(manager, Operation::Apply);
        apply(s, live, config, m, &who, false, Scope::All, T1)
    }

    /// `manager` writes `new` over `live` (an update, every field in scope) at `now`.
    fn write(s: &Schema, live: &Value, new: &Value, m: &mut Managed, manager: &str, now: &str) {
        update(
            s,
            live,
            new,
            m,
            &who(manager, Operation::Update),
            Scope::All,
            now,
        );
    }

    /// A CRD-like schema: `spec.items` a map list by `name`, `spec.tags` a set,
    /// `spec.atomicList` without list type, `spec.sel` an atomic map, `spec.labels` a
    /// string map, `spec.ports` keyed by `port` and `protocol` (default TCP).
    fn crd_schema() -> Schema {
        Schema::custom_resource(&json!({
            "type": "object",
            "properties": {
                "apiVersion": {"type": "string"}, "kind": {"type": "string"},
                "metadata": {"type": "object"},
                "spec": {"type": "object", "properties": {
                    "x": {"type": "string"},
                    "items": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["name"],
                        "items": {"type": "object", "properties": {
                            "name": {"type": "string"}, "v": {"type": "string"}, "w": {"type": "string"}}}},
                    "tags": {"type": "array", "x-kubernetes-list-type": "set", "items": {"type": "string"}},
                    "atomicList": {"type": "array", "items": {"type": "string"}},
                    "sel": {"type": "object", "x-kubernetes-map-type": "atomic",
                        "properties": {"a": {"type": "string"}, "b": {"type": "string"}}},
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["port", "protocol"],
                        "items": {"type": "object", "properties": {
                            "port": {"type": "integer"},
                            "protocol": {"type": "string", "default": "TCP"}}}}
                }}
            }
        }))
    }

    fn obj(spec: Value) -> Value {
        json!({"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "o"}, "spec": spec})
    }

    #[test]
    fn field_sets_in_fields_v1() {
        let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p",
            "labels": {"app": "web"}, "finalizers": ["a/b"],
            "ownerReferences": [{"uid": "u1", "name": "o"}]},
            "spec": {"containers": [{"name": "c", "image": "i",
                "ports": [{"containerPort": 80}], "args": ["x"]}],
                "tolerations": [{"key": "k"}], "nodeSelector": {}}});
        let cases: Vec<(&str, Schema, Value, Value)> = vec![
            (
                "configmap data and labels; name, apiVersion, kind stripped",
                Schema::Builtin,
                json!({"apiVersion": "v1", "kind": "ConfigMap",
                    "metadata": {"name": "x", "labels": {"a": "1"}}, "data": {"k": "v"}}),
                json!({"f:data": {"f:k": {}}, "f:metadata": {"f:labels": {"f:a": {}}}}),
            ),
            (
                "pod: list maps by key with the item itself, set, atomic lists, empty map",
                Schema::Builtin,
                pod,
                json!({
                    "f:metadata": {
                        "f:finalizers": {"v:\"a/b\"": {}},
                        "f:labels": {"f:app": {}},
                        "f:ownerReferences": {"k:{\"uid\":\"u1\"}": {".": {}, "f:name": {}, "f:uid": {}}}
                    },
                    "f:spec": {
                        "f:containers": {"k:{\"name\":\"c\"}": {
                            ".": {}, "f:args": {}, "f:image": {}, "f:name": {},
                            "f:ports": {"k:{\"containerPort\":80,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}}}
                        }},
                        "f:nodeSelector": {},
                        "f:tolerations": {}
                    }
                }),
            ),
            (
                "CRD: map list, set, atomic list, atomic map, additionalProperties entries",
                crd_schema(),
                obj(
                    json!({"items": [{"name": "a", "v": "1"}], "tags": ["t"], "atomicList": ["l"],
                    "sel": {"a": "1"}, "labels": {"k": "v"}}),
                ),
                json!({"f:spec": {
                    "f:atomicList": {},
                    "f:items": {"k:{\"name\":\"a\"}": {".": {}, "f:name": {}, "f:v": {}}},
                    "f:labels": {"f:k": {}},
                    "f:sel": {},
                    "f:tags": {"v:\"t\"": {}}
                }}),
            ),
            (
                "deduced (no schema): every map key is an entry, lists atomic",
                Schema::custom_resource(&json!({})),
                obj(json!({"a": {"b": 1}, "l": [1]})),
                json!({"f:spec": {".": {}, "f:a": {".": {}, "f:b": {}}, "f:l": {}}}),
            ),
        ];
        for (what, s, v, want) in cases {
            let set = field_set(&s, &v);
            assert_eq!(owned(&set), want, "{what}");
            let back = FieldSet::from_fields_v1(&set.to_fields_v1()).unwrap();
            assert_eq!(back, set, "{what}: FieldsV1 round trip");
        }
    }

    #[test]
    fn paths_print_as_structured_merge_diff() {
        let s = Schema::Builtin;
        let v = json!({"spec": {"containers": [{"name": "c", "ports": [{"containerPort": 80}]}]},
            "metadata": {"finalizers": ["f"]}});
        let printed: Vec<String> = field_set(&s, &v).iter().map(|p| path_string(p)).collect();
        for want in [
            r#".spec.containers[name="c"].name"#,
            r#".spec.containers[name="c"].ports[containerPort=80,protocol="TCP"]"#,
            r#".metadata.finalizers[="f"]"#,
        ] {
            assert!(printed.iter().any(|p| p == want), "{want} in {printed:?}");
        }
        assert!(
            FieldSet::from_fields_v1(&json!({"x:y": {}, "f:a": {}}))
                .unwrap()
                .contains(&[PathElement::Field("a".into())])
        );
        assert!(FieldSet::from_fields_v1(&json!({"k:nope": {}})).is_err());
    }

    #[test]
    fn merge_follows_list_and_map_types() {
        let s = crd_schema();
        let cases: Vec<(&str, Value, Value, Value)> = vec![
            (
                "maps merge, scalars replaced",
                json!({"x": "old", "labels": {"a": "1"}}),
                json!({"x": "new", "labels": {"b": "2"}}),
                json!({"x": "new", "labels": {"a": "1", "b": "2"}}),
            ),
            (
                "map list merged by key: shared items follow the applied order, live-only items stay",
                json!({"items": [{"name": "a", "v": "1"}, {"name": "keep"}, {"name": "b", "v": "2"}]}),
                json!({"items": [{"name": "b", "w": "3"}, {"name": "new"}, {"name": "a", "v": "9"}]}),
                json!({"items": [{"name": "keep"}, {"name": "b", "v": "2", "w": "3"}, {"name": "new"}, {"name": "a", "v": "9"}]}),
            ),
            (
                "set merged as a set",
                json!({"tags": ["a", "b"]}),
                json!({"tags": ["b", "c"]}),
                json!({"tags": ["a", "b", "c"]}),
            ),
            (
                "list without list type is atomic",
                json!({"atomicList": ["a", "b"]}),
                json!({"atomicList": ["c"]}),
                json!({"atomicList": ["c"]}),
            ),
            (
                "atomic map replaced",
                json!({"sel": {"a": "1"}}),
                json!({"sel": {"b": "2"}}),
                json!({"sel": {"b": "2"}}),
            ),
            (
                "keys with a default match an item that omits them",
                json!({"ports": [{"port": 80, "protocol": "TCP", "x": 1}]}),
                json!({"ports": [{"port": 80, "y": 2}]}),
                json!({"ports": [{"port": 80, "protocol": "TCP", "x": 1, "y": 2}]}),
            ),
            (
                "an applied null removes the field",
                json!({"x": "a", "labels": {"a": "1"}}),
                json!({"x": null}),
                json!({"labels": {"a": "1"}}),
            ),
        ];
        for (what, live, config, want) in cases {
            assert_eq!(merge(&s, &obj(live), &obj(config)), obj(want), "{what}");
        }
    }

    #[test]
    fn compare_reports_added_maps_and_items() {
        let s = Schema::Builtin;
        let c = compare(
            &s,
            &cm(json!({"a": "1", "b": "2"})),
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": "x", "labels": {"l": "v"}}, "data": {"a": "9"}}),
        );
        assert_eq!(
            c.added.to_fields_v1(),
            json!({"f:metadata": {"f:labels": {".": {}, "f:l": {}}}})
        );
        assert_eq!(c.modified.to_fields_v1(), json!({"f:data": {"f:a": {}}}));
        assert_eq!(c.removed.to_fields_v1(), json!({"f:data": {"f:b": {}}}));
    }

    fn entry<'a>(m: &'a Managed, name: &str) -> &'a Entry {
        m.0.iter().find(|e| e.manager == name).unwrap()
    }

    #[test]
    fn update_moves_ownership_to_the_writer() {
        let s = Schema::Builtin;
        let mut m = Managed::default();
        let created = cm(json!({"a": "1", "b": "2"}));
        write(&s, &json!({}), &created, &mut m, "create", T0);
        assert_eq!(
            m.encode().unwrap(),
            json!([{"manager": "create", "operation": "Update", "apiVersion": "v1", "time": T0,
                "fieldsType": "FieldsV1", "fieldsV1": {"f:data": {".": {}, "f:a": {}, "f:b": {}}}}])
        );
        // Another writer changes a and removes b: a moves, b leaves everyone.
        let edited = cm(json!({"a": "9"}));
        write(&s, &created, &edited, &mut m, "edit", T1);
        assert_eq!(
            entry(&m, "create").fields.to_fields_v1(),
            json!({"f:data": {}})
        );
        assert_eq!(
            entry(&m, "edit").fields.to_fields_v1(),
            json!({"f:data": {"f:a": {}}})
        );
        assert_eq!(entry(&m, "edit").time.as_deref(), Some(T1));
        // A write that changes nothing leaves the entries as they were.
        let before = m.clone();
        write(&s, &edited, &edited, &mut m, "noop", T1);
        assert_eq!(m, before);
        // Removing data altogether empties "create", whose entry goes.
        write(&s, &edited, &cm(json!(null)), &mut m, "edit", T1);
        assert!(m.0.iter().all(|e| e.manager != "create"), "{m:?}");
        // Status is not owned through the main endpoint of a kind with a status subresource.
        let mut m = Managed::default();
        let pod =
            json!({"metadata": {"name": "p"}, "spec": {"x": 1}, "status": {"phase": "Running"}});
        update(
            &s,
            &json!({}),
            &pod,
            &mut m,
            &who("w", Operation::Update),
            Scope::NotStatus,
            T0,
        );
        assert_eq!(
            m.0[0].fields.to_fields_v1(),
            json!({"f:spec": {".": {}, "f:x": {}}})
        );
    }

    #[test]
    fn apply_conflicts_force_and_removal() {
        let s = Schema::Builtin;
        let mut m = Managed::default();
        let live = cm(json!({"a": "1"}));
        write(&s, &json!({}), &live, &mut m, "kubectl-create", T0);

        // Same value: shared ownership, no conflict.
        let applied = ssa(&s, &live, &cm(json!({"a": "1", "b": "2"})), &mut m, "ssa").unwrap();
        assert_eq!(applied["data"], json!({"a": "1", "b": "2"}));
        assert_eq!(
            entry(&m, "ssa").fields.to_fields_v1(),
            json!({"f:data": {"f:a": {}, "f:b": {}}})
        );
        assert!(entry(&m, "kubectl-create").fields.contains(&[
            PathElement::Field("data".into()),
            PathElement::Field("a".into())
        ]));
        assert_eq!(entry(&m, "ssa").time.as_deref(), Some(T1));

        // A different value is a conflict with the updater and with the other applier.
        let live = applied;
        let err = ssa(&s, &live, &cm(json!({"a": "2"})), &mut m.clone(), "other").unwrap_err();
        let st = err.to_status();
        assert_eq!(
            (st["code"].clone(), st["reason"].clone()),
            (json!(409), json!("Conflict"))
        );
        assert_eq!(
            st["message"],
            "Apply failed with 2 conflicts: conflicts with \"kubectl-create\" using v1:\n- .data.a\nconflicts with \"ssa\":\n- .data.a"
        );
        assert_eq!(
            st["details"]["causes"],
            json!([
                {"reason": "FieldManagerConflict", "message": "conflict with \"kubectl-create\" using v1", "field": ".data.a"},
                {"reason": "FieldManagerConflict", "message": "conflict with \"ssa\"", "field": ".data.a"}
            ])
        );
        let one = ssa(
            &s,
            &cm(json!({"b": "2"})),
            &cm(json!({"b": "3"})),
            &mut m.clone(),
            "other",
        )
        .unwrap_err();
        assert_eq!(
            one.to_string(),
            "Apply failed with 1 conflict: conflict with \"ssa\": .data.b"
        );

        // force: the applier takes the field from both.
        let forced = apply(
            &s,
            &live,
            &cm(json!({"a": "2"})),
            &mut m,
            &who("other", Operation::Apply),
            true,
            Scope::All,
            T1,
        )
        .unwrap();
        assert_eq!(forced["data"], json!({"a": "2", "b": "2"}));
        // The creator keeps the map it created (a member with no fields left: `{}`).
        assert_eq!(
            entry(&m, "kubectl-create").fields.to_fields_v1(),
            json!({"f:data": {}})
        );
        assert_eq!(
            entry(&m, "ssa").fields.to_fields_v1(),
            json!({"f:data": {"f:b": {}}})
        );
        assert_eq!(
            entry(&m, "other").fields.to_fields_v1(),
            json!({"f:data": {"f:a": {}}})
        );

        // ssa stops applying b: removed (nobody else owns it); stops applying everything:
        // its entry goes.
        let live = forced;
        let bare = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}});
        let out = ssa(&s, &live, &bare, &mut m, "ssa").unwrap();
        assert_eq!(out["data"], json!({"a": "2"}));
        assert!(m.0.iter().all(|e| e.manager != "ssa"));
        // other stops applying a while an updater co-owns it: a stays.
        let mut m2 = m.clone();
        write(
            &s,
            &out,
            &cm(json!({"a": "2", "c": "3"})),
            &mut m2,
            "editor",
            T1,
        );
        m2.0.iter_mut()
            .find(|e| e.manager == "editor")
            .unwrap()
            .fields
            .insert(vec![
                PathElement::Field("data".into()),
                PathElement::Field("a".into()),
            ]);
        let kept = ssa(
            &s,
            &cm(json!({"a": "2", "c": "3"})),
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x"}}),
            &mut m2,
            "other",
        )
        .unwrap();
        assert_eq!(kept["data"], json!({"a": "2", "c": "3"}));
        // Emptied by removal: the map goes.
        let gone = ssa(
            &s,
            &out,
            &json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "x"}}),
            &mut m,
            "other",
        )
        .unwrap();
        assert_eq!(gone.get("data"), None, "{gone}");
        assert!(m.0.is_empty(), "{m:?}");
    }

    #[test]
    fn apply_removes_list_items_by_key() {
        let s = crd_schema();
        let mut m = Managed::default();
        let v1 = ssa(
            &s,
            &json!({}),
            &obj(
                json!({"items": [{"name": "x", "v": "1"}, {"name": "y", "v": "2"}],
            "tags": ["t1", "t2"]}),
            ),
            &mut m,
            "a",
        )
        .unwrap();
        // Another applier adds a field inside item y.
        let v2 = ssa(
            &s,
            &v1,
            &obj(json!({"items": [{"name": "y", "w": "b"}]})),
            &mut m,
            "b",
        )
        .unwrap();
        assert_eq!(
            v2["spec"]["items"][1],
            json!({"name": "y", "v": "2", "w": "b"})
        );
        // a drops x, y and t2: x goes, y stays with b's field and its key, t2 goes.
        let v3 = ssa(&s, &v2, &obj(json!({"tags": ["t1"]})), &mut m, "a").unwrap();
        assert_eq!(
            v3["spec"],
            json!({"items": [{"name": "y", "w": "b"}], "tags": ["t1"]})
        );
        // A conflict inside a keyed item names it by key.
        let err = ssa(
            &s,
            &v3,
            &obj(json!({"items": [{"name": "y", "w": "c"}]})),
            &mut m.clone(),
            "a",
        )
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            r#"Apply failed with 1 conflict: conflict with "b": .spec.items[name="y"].w"#
        );
    }

    #[test]
    fn managed_fields_encode_sorted_and_decode() {
        let mut m = Managed::default();
        for (name, op, time) in [
            ("z", Operation::Update, T0),
            ("b", Operation::Update, T1),
            ("a", Operation::Update, T1),
            ("y", Operation::Apply, T1),
        ] {
            let mut fields = FieldSet::new();
            fields.insert(vec![PathElement::Field("x".into())]);
            m.0.push(Entry {
                manager: name.into(),
                operation: op,
                api_version: "v1".into(),
                time: Some(time.into()),
                subresource: String::new(),
                fields,
            });
        }
        let enc = m.encode().unwrap();
        let order: Vec<&str> = enc
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["manager"].as_str().unwrap())
            .collect();
        assert_eq!(order, ["y", "z", "a", "b"]);
        let back = Managed::decode(Some(&enc)).unwrap();
        assert_eq!(back.encode(), Some(enc));
        assert!(
            Managed::decode(Some(&json!([{"operation": "Nope", "apiVersion": "v1"}]))).is_err()
        );
        assert!(
            Managed::decode(Some(&json!([{"operation": "Apply", "apiVersion": "v1"}]))).is_err()
        );
        let st = Entry {
            manager: "m".into(),
            operation: Operation::Update,
            api_version: "g/v1".into(),
            time: None,
            subresource: "status".into(),
            fields: FieldSet::new(),
        };
        assert_eq!(st.display(), r#""m" with subresource "status" using g/v1"#);
    }
}
