//! The six MCO kinds' (MachineConfiguration's when its CRD is at hand) generated CRDs compared structurally with the CRDs OpenShift ships
//! (openshift/api `payload-manifests/crds`; MachineConfigNode: the TechPreviewNoUpgrade variant,
//! because machineos implements `configImage`). The test fails on every validation-relevant
//! difference — types, formats, enums, required, nullable, defaults, bounds, patterns, list and
//! map types and keys, int-or-string, preserve-unknown-fields, CEL rules with messages and
//! `optionalOldSelf` (in order), scope, names, versions, subresources, printer columns —
//! and reports all of them at once.
//!
//! Ignored: descriptions, titles and examples, and what the API server defaults identically
//! (`singular`, `listKind`, empty `shortNames`/`categories`, an absent list-type on an array
//! meaning `atomic`, printer-column priority 0). The one documented exception, [`SUPERSET`]:
//! MachineOSConfig `spec.imageBuilder.imageBuilderType` may list machineos' own builders after
//! openshift/api's values.
//!
//! The shipped CRDs are not part of this repository: they are read from the directory named by
//! `MACHINEOS_OPENSHIFT_API_CRDS`, else from `<workspace>/../shared/upstream/openshift-api-crds`.
//! Without either the test says so on stderr and passes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

/// The kinds compared; machineos' own v1alpha1 kinds have no upstream.
const KINDS: [&str; 6] = [
    "MachineConfig",
    "MachineConfigPool",
    "MachineOSConfig",
    "MachineOSBuild",
    "MachineConfigNode",
    "MachineConfiguration",
];

/// Kinds compared only when the directory holds their CRD: MachineConfiguration
/// (`payload-manifests/crds/0000_80_machine-config_01_machineconfigurations.crd.yaml`), which
/// not every copy of the shipped CRDs includes. Its absence is said on stderr — and is a
/// failure when the directory was named (`MACHINEOS_OPENSHIFT_API_CRDS`).
const OPTIONAL: [&str; 1] = ["MachineConfiguration"];

/// The deliberate difference: (kind, schema path, keyword) where machineos' enum may be a
/// superset of openshift/api's, listing openshift/api's values first.
const SUPERSET: (&str, &str, &str) = (
    "MachineOSConfig",
    "spec.imageBuilder.imageBuilderType",
    "enum",
);

/// Schema keywords without effect on validation or storage.
const IGNORED: [&str; 4] = ["description", "title", "example", "externalDocs"];

/// Where the shipped CRDs are, or why the comparison cannot run.
fn upstream_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("MACHINEOS_OPENSHIFT_API_CRDS") {
        let dir = PathBuf::from(dir);
        // Named explicitly: a wrong path is an error, not a reason to skip.
        assert!(
            dir.is_dir(),
            "MACHINEOS_OPENSHIFT_API_CRDS={} is not a directory",
            dir.display()
        );
        return Ok(dir);
    }
    let dir =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../../../shared/upstream/openshift-api-crds");
    if dir.is_dir() {
        Ok(dir)
    } else {
        Err(format!(
            "MACHINEOS_OPENSHIFT_API_CRDS is unset and {} does not exist",
            dir.display()
        ))
    }
}

/// The CRDs of one directory's `*.yaml` files, by kind.
fn read_crds(dir: &Path, into: &mut BTreeMap<String, Value>) {
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|x| x == "yaml"))
        .collect();
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file).unwrap();
        let docs: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        for doc in docs.into_iter().filter(|d| !d.is_null()) {
            let kind = doc["spec"]["names"]["kind"].as_str().unwrap().to_owned();
            into.insert(kind, doc);
        }
    }
}

/// openshift/api's CRDs by kind, MachineConfigNode from `techpreview/`.
fn upstream(dir: &Path) -> BTreeMap<String, Value> {
    let mut crds = BTreeMap::new();
    read_crds(dir, &mut crds);
    let techpreview = dir.join("techpreview");
    assert!(
        techpreview.is_dir(),
        "{} is missing: MachineConfigNode is compared with its TechPreviewNoUpgrade variant",
        techpreview.display()
    );
    read_crds(&techpreview, &mut crds);
    crds
}

/// machineos' CRDs by kind, as JSON.
fn ours() -> BTreeMap<String, Value> {
    machineos_api::crds()
        .iter()
        .map(|c| (c.spec.names.kind.clone(), serde_json::to_value(c).unwrap()))
        .collect()
}

/// JSON equality with numbers compared by value (`0` equals `0.0`: k8s-openapi stores bounds
/// as floats).
fn same(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(x, y)| same(x, y))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len() && x.iter().all(|(k, v)| y.get(k).is_some_and(|w| same(v, w)))
        }
        _ => a == b,
    }
}

/// Differences of one kind, as readable lines.
struct Differ<'a> {
    kind: &'a str,
    diffs: Vec<String>,
    /// Whether [`SUPERSET`] was looked at (it must exist upstream).
    superset_seen: bool,
}

impl Differ<'_> {
    fn add(&mut self, path: &str, key: &str, ours: Option<&Value>, theirs: Option<&Value>) {
        let show = |v: Option<&Value>| v.map_or("<absent>".to_owned(), Value::to_string);
        self.diffs.push(format!(
            "{} {}: {key}: machineos {} vs openshift/api {}",
            self.kind,
            if path.is_empty() { "(root)" } else { path },
            show(ours),
            show(theirs)
        ));
    }

    /// Compare two values of one keyword; `true` when equal.
    fn keyword(&mut self, path: &str, key: &str, ours: Option<&Value>, theirs: Option<&Value>) {
        let equal = match (key, ours, theirs) {
            (_, None, None) => true,
            (_, Some(o), Some(t)) if same(o, t) => true,
            ("required", o, t) => {
                let set = |v: Option<&Value>| -> BTreeSet<String> {
                    v.and_then(Value::as_array)
                        .map(|a| a.iter().map(Value::to_string).collect())
                        .unwrap_or_default()
                };
                set(o) == set(t)
            }
            _ => false,
        };
        if !equal {
            self.add(path, key, ours, theirs);
        }
    }

    fn schema(&mut self, ours: &Value, theirs: &Value, path: &str) {
        let empty = serde_json::Map::new();
        let o = ours.as_object().unwrap_or(&empty);
        let t = theirs.as_object().unwrap_or(&empty);
        let is_array = o.get("type").or(t.get("type")) == Some(&json!("array"));
        let keys: BTreeSet<&String> = o.keys().chain(t.keys()).collect();
        for key in keys {
            let (ov, tv) = (o.get(key.as_str()), t.get(key.as_str()));
            match key.as_str() {
                k if IGNORED.contains(&k) => {}
                "properties" | "items" | "additionalProperties" => {}
                "x-kubernetes-list-type" if is_array => {
                    let atomic = json!("atomic");
                    self.keyword(
                        path,
                        key,
                        Some(ov.unwrap_or(&atomic)),
                        Some(tv.unwrap_or(&atomic)),
                    );
                }
                "enum" if (self.kind, path, "enum") == SUPERSET => {
                    self.superset_seen = true;
                    let (Some(Value::Array(ov)), Some(Value::Array(tv))) = (ov, tv) else {
                        self.add(path, key, ov, tv);
                        continue;
                    };
                    if ov.len() < tv.len() || !ov.iter().zip(tv).all(|(a, b)| same(a, b)) {
                        self.add(
                            path,
                            "enum (must start with openshift/api's values)",
                            Some(&Value::Array(ov.clone())),
                            Some(&Value::Array(tv.clone())),
                        );
                    }
                }
                _ => self.keyword(path, key, ov, tv),
            }
        }
        let (op, tp) = (o.get("properties"), t.get("properties"));
        let (op, tp) = (
            op.and_then(Value::as_object).unwrap_or(&empty),
            tp.and_then(Value::as_object).unwrap_or(&empty),
        );
        let names: BTreeSet<&String> = op.keys().chain(tp.keys()).collect();
        for name in names {
            let sub = if path.is_empty() {
                name.clone()
            } else {
                format!("{path}.{name}")
            };
            match (op.get(name.as_str()), tp.get(name.as_str())) {
                (Some(a), Some(b)) => self.schema(a, b, &sub),
                (a, b) => {
                    let present = json!("present");
                    self.add(&sub, "(property)", a.map(|_| &present), b.map(|_| &present));
                }
            }
        }
        match (o.get("items"), t.get("items")) {
            (Some(a), Some(b)) => self.schema(a, b, &format!("{path}[]")),
            (None, None) => {}
            (a, b) => self.add(path, "items", a, b),
        }
        match (o.get("additionalProperties"), t.get("additionalProperties")) {
            (Some(a @ Value::Object(_)), Some(b @ Value::Object(_))) => {
                self.schema(a, b, &format!("{path}{{}}"))
            }
            (a, b) => self.keyword(path, "additionalProperties", a, b),
        }
    }

    /// Everything outside the schemas.
    fn crd(&mut self, ours: &Value, theirs: &Value) {
        let (o, t) = (&ours["spec"], &theirs["spec"]);
        for key in ["group", "scope"] {
            self.keyword("spec", key, o.get(key), t.get(key));
        }
        let kind = self.kind;
        let defaults = json!({
            "singular": kind.to_lowercase(),
            "listKind": format!("{kind}List"),
            "shortNames": [],
            "categories": [],
        });
        for key in [
            "kind",
            "plural",
            "singular",
            "listKind",
            "shortNames",
            "categories",
        ] {
            let with_default = |names: &Value| names.get(key).or(defaults.get(key)).cloned();
            let (a, b) = (with_default(&o["names"]), with_default(&t["names"]));
            self.keyword("spec.names", key, a.as_ref(), b.as_ref());
        }
        let flag = |v: &Value, key: &str| v.get(key).cloned().unwrap_or(json!(false));
        self.keyword(
            "spec",
            "preserveUnknownFields",
            Some(&flag(o, "preserveUnknownFields")),
            Some(&flag(t, "preserveUnknownFields")),
        );
        let conversion = |v: &Value| {
            v.get("conversion")
                .cloned()
                .unwrap_or(json!({"strategy": "None"}))
        };
        self.keyword(
            "spec",
            "conversion",
            Some(&conversion(o)),
            Some(&conversion(t)),
        );

        let versions = |v: &Value| -> BTreeMap<String, Value> {
            v["versions"]
                .as_array()
                .unwrap()
                .iter()
                .map(|v| (v["name"].as_str().unwrap().to_owned(), v.clone()))
                .collect()
        };
        let (ov, tv) = (versions(o), versions(t));
        let names: BTreeSet<&String> = ov.keys().chain(tv.keys()).collect();
        for name in names {
            let (Some(o), Some(t)) = (ov.get(name), tv.get(name)) else {
                self.add("spec.versions", name, ov.get(name), tv.get(name));
                continue;
            };
            let at = format!("version {name}");
            self.keyword(&at, "served", o.get("served"), t.get("served"));
            self.keyword(&at, "storage", o.get("storage"), t.get("storage"));
            self.keyword(
                &at,
                "deprecated",
                Some(&flag(o, "deprecated")),
                Some(&flag(t, "deprecated")),
            );
            for key in ["deprecationWarning", "subresources", "selectableFields"] {
                self.keyword(&at, key, o.get(key), t.get(key));
            }
            let columns = |v: &Value| -> Value {
                let mut columns = v
                    .get("additionalPrinterColumns")
                    .cloned()
                    .unwrap_or(json!([]));
                for c in columns.as_array_mut().unwrap() {
                    let c = c.as_object_mut().unwrap();
                    c.remove("description");
                    if c.get("priority") == Some(&json!(0)) {
                        c.remove("priority");
                    }
                }
                columns
            };
            self.keyword(
                &at,
                "additionalPrinterColumns",
                Some(&columns(o)),
                Some(&columns(t)),
            );
            self.schema(
                &o["schema"]["openAPIV3Schema"],
                &t["schema"]["openAPIV3Schema"],
                "",
            );
        }
    }
}

/// All differences between `ours` and `theirs` for [`KINDS`], and whether [`SUPERSET`]'s
/// location exists upstream.
fn compare(
    ours: &BTreeMap<String, Value>,
    theirs: &BTreeMap<String, Value>,
) -> (Vec<String>, bool) {
    let mut diffs = Vec::new();
    let mut superset_seen = false;
    for kind in KINDS {
        if OPTIONAL.contains(&kind)
            && !theirs.contains_key(kind)
            && std::env::var_os("MACHINEOS_OPENSHIFT_API_CRDS").is_none()
        {
            eprintln!(
                "{kind}: NOT COMPARED — the directory has no CRD for it (openshift/api \
                 payload-manifests/crds/0000_80_machine-config_01_machineconfigurations.crd.yaml)"
            );
            continue;
        }
        let (Some(o), Some(t)) = (ours.get(kind), theirs.get(kind)) else {
            diffs.push(format!(
                "{kind}: CRD missing (machineos: {}, openshift/api: {})",
                ours.contains_key(kind),
                theirs.contains_key(kind)
            ));
            continue;
        };
        let mut differ = Differ {
            kind,
            diffs: Vec::new(),
            superset_seen: false,
        };
        differ.crd(o, t);
        diffs.append(&mut differ.diffs);
        superset_seen |= differ.superset_seen;
    }
    (diffs, superset_seen)
}

/// The upstream CRDs, or `None` after saying on stderr why the comparison is skipped.
fn upstream_or_skip(test: &str) -> Option<BTreeMap<String, Value>> {
    match upstream_dir() {
        Ok(dir) => Some(upstream(&dir)),
        Err(why) => {
            eprintln!("{test}: NOT RUN — the shipped openshift/api CRDs are not available: {why}");
            None
        }
    }
}

#[test]
fn generated_crds_equal_openshift_api() {
    let Some(theirs) = upstream_or_skip("generated_crds_equal_openshift_api") else {
        return;
    };
    let (diffs, superset_seen) = compare(&ours(), &theirs);
    assert!(
        superset_seen,
        "the documented superset {SUPERSET:?} points at no enum in openshift/api's CRDs"
    );
    assert!(
        diffs.is_empty(),
        "{} validation-relevant differences from openshift/api:\n  {}",
        diffs.len(),
        diffs.join("\n  ")
    );
}

/// The schema node at `pointer` in `kind`'s first version.
fn schema_at<'a>(
    crds: &'a mut BTreeMap<String, Value>,
    kind: &str,
    pointer: &str,
) -> &'a mut Value {
    crds.get_mut(kind).unwrap()["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        .pointer_mut(pointer)
        .unwrap_or_else(|| panic!("{kind} {pointer}"))
}

/// The comparison itself notices changes: each edit to a copy of openshift/api's CRDs is
/// reported, and the superset exception admits extra builder types but no missing value.
#[test]
fn comparison_detects_differences() {
    let Some(theirs) = upstream_or_skip("comparison_detects_differences") else {
        return;
    };
    type Edit = (
        &'static str,
        &'static str,
        fn(&mut Value),
        Option<&'static str>,
    );
    let edits: [Edit; 7] = [
        // (kind, pointer, edit, expected fragment; None = accepted)
        (
            "MachineOSBuild",
            "/properties/spec/properties/machineConfig/properties/name",
            |v| {
                v["minLength"] = json!(1);
            },
            Some("spec.machineConfig.name: minLength"),
        ),
        (
            "MachineConfigNode",
            "/properties/status/properties/observedGeneration",
            |v| {
                v["x-kubernetes-validations"][0]["message"] = json!("other");
            },
            Some("status.observedGeneration: x-kubernetes-validations"),
        ),
        (
            "MachineConfigPool",
            "/properties/spec/properties/maxUnavailable",
            |v| {
                v["nullable"] = json!(true);
            },
            Some("spec.maxUnavailable: nullable"),
        ),
        (
            "MachineConfig",
            "",
            |v| {
                v["required"] = json!(["spec"]);
            },
            Some("(root): required"),
        ),
        (
            "MachineOSConfig",
            "/properties/spec/properties/imageBuilder/properties/imageBuilderType",
            |v| {
                v["enum"] = json!(["Job", "Native"]);
            },
            None,
        ),
        (
            "MachineOSConfig",
            "/properties/spec/properties/imageBuilder/properties/imageBuilderType",
            |v| {
                v["enum"] = json!(["Native", "Job"]);
            },
            Some("must start with openshift/api's values"),
        ),
        (
            "MachineOSConfig",
            "/properties/spec/properties/imageBuilder/properties/imageBuilderType",
            |v| {
                v["description"] = json!("changed");
            },
            None,
        ),
    ];
    for (kind, pointer, edit, want) in edits {
        let mut changed = theirs.clone();
        edit(schema_at(&mut changed, kind, pointer));
        let (diffs, _) = compare(&changed, &theirs);
        match want {
            None => assert!(diffs.is_empty(), "{kind} {pointer}: {diffs:?}"),
            Some(fragment) => assert!(
                diffs.len() == 1 && diffs[0].contains(fragment),
                "{kind} {pointer}: want one difference with {fragment:?}, got {diffs:?}"
            ),
        }
    }
}
