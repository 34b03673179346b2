//! The fields of openshift/api `build/v1` (github.com/openshift/api, `build/v1/types.go`)
//! that a Build holds, from the Go types' `json:"…"` tags, and a check of a Build as JSON
//! against them. Shared by the Build and the Build-state tests.

use std::collections::BTreeMap;

use serde_json::Value;

/// What a JSON value of some Go type may be.
#[derive(Clone, Copy)]
enum Ty {
    /// A struct: its JSON field names (from the `json:"…"` tags; inlined structs' fields
    /// included) and each field's type.
    Struct(&'static str),
    /// A string from a fixed set (a Go string type with constants).
    Enum(&'static [&'static str]),
    Str,
    Bool,
    Int,
    /// A `[]T`.
    List(&'static Ty),
    /// A `map[string]string`.
    StringMap,
    /// `metav1.ObjectMeta`, checked through `k8s-openapi`.
    ObjectMeta,
}

/// The Go types of openshift/api `build/v1/types.go` (and the `corev1` ones they use) that
/// a Build's spec and status hold, as `(type, [(json name, type)])`, the JSON names copied
/// from the `json:"…"` tags. Only the types this crate writes or reads are listed in full
/// where they are used; a type listed here lists every field of its Go struct.
fn go_types() -> BTreeMap<&'static str, Vec<(&'static str, Ty)>> {
    use Ty::*;
    const CONFIG_MAPS: Ty = List(&Struct("ConfigMapBuildSource"));
    const TRIGGERS: Ty = List(&Struct("BuildTriggerCause"));
    const ENV: Ty = List(&Struct("corev1.EnvVar"));
    const STAGES: Ty = List(&Struct("StageInfo"));
    let mut t = BTreeMap::new();
    t.insert(
        "Build",
        vec![
            ("apiVersion", Str),
            ("kind", Str),
            ("metadata", ObjectMeta),
            ("spec", Struct("BuildSpec")),
            ("status", Struct("BuildStatus")),
        ],
    );
    // BuildSpec = CommonSpec (inline) + triggeredBy.
    t.insert(
        "BuildSpec",
        vec![
            ("serviceAccount", Str),
            ("source", Struct("BuildSource")),
            ("revision", Struct("SourceRevision")),
            ("strategy", Struct("BuildStrategy")),
            ("output", Struct("BuildOutput")),
            ("resources", Struct("corev1.ResourceRequirements")),
            ("postCommit", Struct("BuildPostCommitSpec")),
            ("completionDeadlineSeconds", Int),
            ("nodeSelector", StringMap),
            ("triggeredBy", TRIGGERS),
        ],
    );
    t.insert(
        "BuildTriggerCause",
        vec![
            ("message", Str),
            ("genericWebHook", Struct("GenericWebHookCause")),
            ("githubWebHook", Struct("GitHubWebHookCause")),
            ("imageChangeBuild", Struct("ImageChangeCause")),
            ("gitlabWebHook", Struct("GitLabWebHookCause")),
            ("bitbucketWebHook", Struct("BitbucketWebHookCause")),
        ],
    );
    t.insert(
        "BuildSource",
        vec![
            (
                "type",
                Enum(&["Git", "Dockerfile", "Binary", "Image", "None"]),
            ),
            ("binary", Struct("BinaryBuildSource")),
            ("dockerfile", Str),
            ("git", Struct("GitBuildSource")),
            ("images", List(&Struct("ImageSource"))),
            ("contextDir", Str),
            ("sourceSecret", Struct("corev1.LocalObjectReference")),
            ("secrets", List(&Struct("SecretBuildSource"))),
            ("configMaps", CONFIG_MAPS),
        ],
    );
    t.insert(
        "ConfigMapBuildSource",
        vec![
            ("configMap", Struct("corev1.LocalObjectReference")),
            ("destinationDir", Str),
        ],
    );
    t.insert("corev1.LocalObjectReference", vec![("name", Str)]);
    t.insert(
        "BuildStrategy",
        vec![
            (
                "type",
                Enum(&["Docker", "Source", "Custom", "JenkinsPipeline"]),
            ),
            ("dockerStrategy", Struct("DockerBuildStrategy")),
            ("sourceStrategy", Struct("SourceBuildStrategy")),
            ("customStrategy", Struct("CustomBuildStrategy")),
            (
                "jenkinsPipelineStrategy",
                Struct("JenkinsPipelineBuildStrategy"),
            ),
        ],
    );
    t.insert(
        "DockerBuildStrategy",
        vec![
            ("from", Struct("corev1.ObjectReference")),
            ("pullSecret", Struct("corev1.LocalObjectReference")),
            ("noCache", Bool),
            ("env", ENV),
            ("forcePull", Bool),
            ("dockerfilePath", Str),
            ("buildArgs", ENV),
            (
                "imageOptimizationPolicy",
                Enum(&["None", "SkipLayers", "SkipLayersAndWarn"]),
            ),
            ("volumes", List(&Struct("BuildVolume"))),
        ],
    );
    t.insert(
        "BuildVolume",
        vec![
            ("name", Str),
            ("source", Struct("BuildVolumeSource")),
            ("mounts", List(&Struct("BuildVolumeMount"))),
        ],
    );
    t.insert(
        "BuildVolumeSource",
        vec![
            ("type", Enum(&["Secret", "ConfigMap", "CSI"])),
            ("secret", Struct("corev1.SecretVolumeSource")),
            ("configMap", Struct("corev1.ConfigMapVolumeSource")),
            ("csi", Struct("corev1.CSIVolumeSource")),
        ],
    );
    t.insert("BuildVolumeMount", vec![("destinationPath", Str)]);
    // corev1's: ConfigMapVolumeSource inlines LocalObjectReference (`name`).
    t.insert(
        "corev1.SecretVolumeSource",
        vec![
            ("secretName", Str),
            ("items", List(&Struct("corev1.KeyToPath"))),
            ("defaultMode", Int),
            ("optional", Bool),
        ],
    );
    t.insert(
        "corev1.ConfigMapVolumeSource",
        vec![
            ("name", Str),
            ("items", List(&Struct("corev1.KeyToPath"))),
            ("defaultMode", Int),
            ("optional", Bool),
        ],
    );
    t.insert(
        "corev1.KeyToPath",
        vec![("key", Str), ("path", Str), ("mode", Int)],
    );
    t.insert(
        "BuildOutput",
        vec![
            // BuildOutput.To: "Kind must be one of 'ImageStreamTag' or 'DockerImage'".
            ("to", Struct("BuildOutput.to")),
            ("pushSecret", Struct("corev1.LocalObjectReference")),
            ("imageLabels", List(&Struct("ImageLabel"))),
        ],
    );
    // A corev1.ObjectReference whose kind BuildOutput restricts.
    t.insert(
        "BuildOutput.to",
        vec![
            ("kind", Enum(&["ImageStreamTag", "DockerImage"])),
            ("namespace", Str),
            ("name", Str),
            ("uid", Str),
            ("apiVersion", Str),
            ("resourceVersion", Str),
            ("fieldPath", Str),
        ],
    );
    t.insert(
        "BuildStatus",
        vec![
            (
                "phase",
                Enum(&[
                    // The Go zero value: `phase` has no `omitempty`.
                    "",
                    "New",
                    "Pending",
                    "Running",
                    "Complete",
                    "Failed",
                    "Error",
                    "Cancelled",
                ]),
            ),
            ("cancelled", Bool),
            ("reason", Str),
            ("message", Str),
            ("startTimestamp", Str),
            ("completionTimestamp", Str),
            ("duration", Int),
            ("outputDockerImageReference", Str),
            ("config", Struct("corev1.ObjectReference")),
            ("output", Struct("BuildStatusOutput")),
            ("stages", STAGES),
            ("logSnippet", Str),
        ],
    );
    t.insert(
        "BuildStatusOutput",
        vec![("to", Struct("BuildStatusOutputTo"))],
    );
    t.insert("BuildStatusOutputTo", vec![("imageDigest", Str)]);
    t
}

/// The fields whose Go tag has no `omitempty` (the API's OpenAPI schema lists them as
/// required), among the types above.
const REQUIRED: &[(&str, &str)] = &[
    ("BuildSpec", "strategy"),
    ("BuildSpec", "triggeredBy"),
    ("BuildSource", "type"),
    ("BuildStrategy", "type"),
    ("ConfigMapBuildSource", "configMap"),
    ("BuildVolume", "name"),
    ("BuildVolume", "source"),
    ("BuildVolume", "mounts"),
    ("BuildVolumeSource", "type"),
    ("BuildVolumeMount", "destinationPath"),
    ("corev1.KeyToPath", "key"),
    ("corev1.KeyToPath", "path"),
    ("BuildStatus", "phase"),
];

/// Checks that every field of `value` at `path` exists in the Go type `ty` with the JSON
/// type and, for enums, a value the Go constants allow; returns the problems.
fn check(value: &Value, ty: Ty, path: &str, problems: &mut Vec<String>) {
    let types = go_types();
    match (ty, value) {
        (Ty::Struct(name), Value::Object(map)) => {
            let Some(fields) = types.get(name) else {
                problems.push(format!("{path}: type {name} is not in the list"));
                return;
            };
            for (key, child) in map {
                match fields.iter().find(|(f, _)| f == key) {
                    Some((_, child_ty)) => {
                        check(child, *child_ty, &format!("{path}.{key}"), problems)
                    }
                    None => problems.push(format!("{path}.{key}: no such field in {name}")),
                }
            }
            for (ty_name, field) in REQUIRED {
                if ty_name == &name && !map.contains_key(*field) {
                    problems.push(format!("{path}.{field}: required in {name}, missing"));
                }
            }
        }
        (Ty::Enum(values), Value::String(s)) if values.contains(&s.as_str()) => {}
        (Ty::Str, Value::String(_)) | (Ty::Bool, Value::Bool(_)) => {}
        (Ty::Int, Value::Number(n)) if n.is_i64() => {}
        (Ty::List(item), Value::Array(items)) => {
            for (i, v) in items.iter().enumerate() {
                check(v, *item, &format!("{path}[{i}]"), problems);
            }
        }
        (Ty::StringMap, Value::Object(map)) if map.values().all(Value::is_string) => {}
        (Ty::ObjectMeta, meta) => {
            let typed: Result<k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta, _> =
                serde_json::from_value(meta.clone());
            match typed {
                Ok(t) if serde_json::to_value(&t).unwrap() == *meta => {}
                _ => problems.push(format!("{path}: not an ObjectMeta k8s-openapi keeps whole")),
            }
        }
        (_, other) => problems.push(format!("{path}: {other} does not fit its Go type")),
    }
}

pub fn check_build(build: &Value) -> Vec<String> {
    let mut problems = Vec::new();
    check(build, Ty::Struct("Build"), "", &mut problems);
    problems
}
