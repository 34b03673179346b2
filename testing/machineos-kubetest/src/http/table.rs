//! Server-side `Table` rendering (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`),
//! which `kubectl get` asks for and prints as it comes: the columns and cells of each
//! kind, as kube-apiserver's printers produce them.
//!
//! Contract:
//! * Custom resources follow apiextensions-apiserver's `tableconvertor`: `Name` first, then
//!   the storage version's `additionalPrinterColumns` in order, each evaluated with a
//!   JSONPath; a CRD without printer columns gets the `Age` column
//!   (`.metadata.creationTimestamp`, type `date`) the CRD handler adds by default. Cells
//!   are typed as `cellForJSONValue` does (`integer` → int, `number` → float, `boolean`,
//!   `string` printed as JSONPath prints it, `date` → an age like `5m`/`2d3h`, a value of
//!   the wrong type → `null`); a path matching nothing gives `null`.
//! * Built-in kinds follow `pkg/printers/internalversion/printers.go` of Kubernetes 1.32
//!   for the kinds served here: namespaces (NAME STATUS AGE), configmaps (NAME DATA AGE),
//!   secrets (NAME TYPE DATA AGE), serviceaccounts (NAME SECRETS AGE), nodes (NAME STATUS
//!   ROLES AGE VERSION; wide: INTERNAL-IP EXTERNAL-IP OS-IMAGE KERNEL-VERSION
//!   CONTAINER-RUNTIME), pods (NAME READY STATUS RESTARTS AGE; wide: IP NODE NOMINATED
//!   NODE READINESS GATES), jobs (NAME STATUS COMPLETIONS DURATION AGE; wide: CONTAINERS
//!   IMAGES SELECTOR), leases (NAME HOLDER AGE), poddisruptionbudgets (NAME MIN AVAILABLE
//!   MAX UNAVAILABLE ALLOWED DISRUPTIONS AGE), core events (LAST SEEN TYPE REASON OBJECT
//!   MESSAGE), customresourcedefinitions (NAME CREATED AT, the default convertor's). Any
//!   other kind gets NAME AGE. Columns `-o wide` adds have `priority: 1`.
//! * `includeObject=None|Metadata|Object` (default `Metadata`, a `PartialObjectMetadata`
//!   per row) as `metav1.TableOptions` says; anything else is a 400.
//! * Ages are `duration.HumanDuration` of the time since the timestamp (`<unknown>` for
//!   none, `<invalid>` for a timestamp in the future by more than a second).
//!
//! Simplifications: the pod STATUS column reads `status.reason`, container waiting and
//! terminated reasons and `deletionTimestamp` (`Terminating`), not init containers or
//! sidecars; RESTARTS has no "(5m ago)" suffix; events omit the wide columns. The JSONPath
//! dialect is the subset CRDs use (`.a.b`, `.a[0]`, `.a[*].b`, `.a[?(@.k=="v")].b`),
//! written here because `k8s.io/client-go/util/jsonpath` differs from RFC 9535 JSONPath
//! (no `$`, Go-template printing) and no Rust crate implements it.

use serde_json::{Value, json};

use crate::error::ApiError;
use crate::resource::ResourceInfo;

/// What each row carries of its object (`metav1.TableOptions.IncludeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object.
    None,
    /// A `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

impl IncludeObject {
    /// Parses the `includeObject` query parameter.
    pub fn parse(v: Option<&str>) -> Result<IncludeObject, ApiError> {
        match v {
            None | Some("" | "Metadata") => Ok(IncludeObject::Metadata),
            Some("None") => Ok(IncludeObject::None),
            Some("Object") => Ok(IncludeObject::Object),
            Some(o) => Err(ApiError::bad_request(format!(
                "includeObject: Unsupported value: {o:?}: supported values: \"Metadata\", \"None\", \"Object\""
            ))),
        }
    }
}

/// Whether an `Accept` header asks for a `Table` (its first media type that names `as=`
/// is `as=Table` with `g=meta.k8s.io`).
pub fn wants_table(accept: &str) -> bool {
    accept.split(',').any(|mt| {
        let params: Vec<&str> = mt.split(';').map(str::trim).collect();
        params.contains(&"as=Table") && params.contains(&"g=meta.k8s.io")
    })
}

/// One column definition.
#[derive(Debug, Clone, PartialEq)]
pub struct Column {
    /// The header.
    pub name: String,
    /// `string`, `integer`, `number`, `boolean`, `date`.
    pub kind: String,
    /// `name` for the name column, else empty.
    pub format: String,
    /// 0 always shown, 1 with `-o wide`.
    pub priority: i64,
    /// The description.
    pub description: String,
    /// The JSONPath of a CRD column.
    pub path: Option<String>,
}

fn col(name: &str, kind: &str, priority: i64, description: &str) -> Column {
    Column {
        name: name.into(),
        kind: kind.into(),
        format: if name == "Name" {
            "name".into()
        } else {
            String::new()
        },
        priority,
        description: description.into(),
        path: None,
    }
}

const NAME_DESC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const AGE_DESC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";

/// The columns of `info`'s Table.
pub fn columns(info: &ResourceInfo) -> Vec<Column> {
    let name = col("Name", "string", 0, NAME_DESC);
    let age = || col("Age", "string", 0, AGE_DESC);
    if info.is_custom() || (info.group == "build.openshift.io" && info.kind == "Build") {
        let mut out = vec![name];
        if info.printer_columns.is_empty() {
            let mut a = col("Age", "date", 0, AGE_DESC);
            a.path = Some(".metadata.creationTimestamp".into());
            out.push(a);
        }
        for c in &info.printer_columns {
            let s = |k: &str| c.get(k).and_then(Value::as_str).unwrap_or("").to_string();
            let path = s("jsonPath");
            let desc = match s("description") {
                d if d.is_empty() => {
                    format!("Custom resource definition column (in JSONPath format): {path}")
                }
                d => d,
            };
            out.push(Column {
                name: s("name"),
                kind: s("type"),
                format: s("format"),
                priority: c.get("priority").and_then(Value::as_i64).unwrap_or(0),
                description: desc,
                path: Some(path),
            });
        }
        return out;
    }
    let mut out = vec![name];
    let add = |out: &mut Vec<Column>, cols: &[(&str, &str, i64, &str)]| {
        for (n, k, p, d) in cols {
            out.push(col(n, k, *p, d));
        }
    };
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "Namespace") => {
            add(
                &mut out,
                &[("Status", "string", 0, "The status of the namespace")],
            );
            out.push(age());
        }
        ("", "ConfigMap") => {
            add(
                &mut out,
                &[(
                    "Data",
                    "string",
                    0,
                    "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'.",
                )],
            );
            out.push(age());
        }
        ("", "Secret") => {
            add(
                &mut out,
                &[
                    (
                        "Type",
                        "string",
                        0,
                        "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
                    ),
                    (
                        "Data",
                        "string",
                        0,
                        "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'.",
                    ),
                ],
            );
            out.push(age());
        }
        ("", "ServiceAccount") => {
            add(
                &mut out,
                &[(
                    "Secrets",
                    "string",
                    0,
                    "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use.",
                )],
            );
            out.push(age());
        }
        ("", "Node") => {
            add(
                &mut out,
                &[
                    ("Status", "string", 0, "The status of the node"),
                    ("Roles", "string", 0, "The roles of the node"),
                ],
            );
            out.push(age());
            add(
                &mut out,
                &[
                    (
                        "Version",
                        "string",
                        0,
                        "Kubelet Version reported by the node.",
                    ),
                    (
                        "Internal-IP",
                        "string",
                        1,
                        "List of addresses reachable to the node. Queried from cloud provider, if available.",
                    ),
                    (
                        "External-IP",
                        "string",
                        1,
                        "List of addresses reachable to the node. Queried from cloud provider, if available.",
                    ),
                    (
                        "OS-Image",
                        "string",
                        1,
                        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
                    ),
                    (
                        "Kernel-Version",
                        "string",
                        1,
                        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
                    ),
                    (
                        "Container-Runtime",
                        "string",
                        1,
                        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
                    ),
                ],
            );
        }
        ("", "Pod") => {
            add(
                &mut out,
                &[
                    (
                        "Ready",
                        "string",
                        0,
                        "The aggregate readiness state of this pod for accepting traffic.",
                    ),
                    (
                        "Status",
                        "string",
                        0,
                        "The aggregate status of the containers in this pod.",
                    ),
                    (
                        "Restarts",
                        "string",
                        0,
                        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                    ),
                ],
            );
            out.push(age());
            add(
                &mut out,
                &[
                    (
                        "IP",
                        "string",
                        1,
                        "IP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
                    ),
                    (
                        "Node",
                        "string",
                        1,
                        "NodeName is a request to schedule this pod onto a specific node. If it is non-empty, the scheduler simply schedules this pod onto that node, assuming that it fits resource requirements.",
                    ),
                    (
                        "Nominated Node",
                        "string",
                        1,
                        "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
                    ),
                    (
                        "Readiness Gates",
                        "string",
                        1,
                        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
                    ),
                ],
            );
        }
        ("batch", "Job") => {
            add(
                &mut out,
                &[
                    ("Status", "string", 0, "Status of the job."),
                    (
                        "Completions",
                        "string",
                        0,
                        "The completion status of the job",
                    ),
                    (
                        "Duration",
                        "string",
                        0,
                        "Time required to complete the job.",
                    ),
                ],
            );
            out.push(age());
            add(
                &mut out,
                &[
                    (
                        "Containers",
                        "string",
                        1,
                        "Names of each container in the template.",
                    ),
                    (
                        "Images",
                        "string",
                        1,
                        "Images referenced by each container in the template.",
                    ),
                    (
                        "Selector",
                        "string",
                        1,
                        "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
                    ),
                ],
            );
        }
        ("coordination.k8s.io", "Lease") => {
            add(
                &mut out,
                &[(
                    "Holder",
                    "string",
                    0,
                    "holderIdentity contains the identity of the holder of a current lease.",
                )],
            );
            out.push(age());
        }
        ("policy", "PodDisruptionBudget") => {
            add(
                &mut out,
                &[
                    (
                        "Min Available",
                        "string",
                        0,
                        "The minimum number of pods that must be available simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\".",
                    ),
                    (
                        "Max Unavailable",
                        "string",
                        0,
                        "The maximum number of pods that may be unavailable simultaneously.  This can be either an integer or a string specifying a percentage, e.g. \"28%\".",
                    ),
                    (
                        "Allowed Disruptions",
                        "integer",
                        0,
                        "Number of pod disruptions that are currently allowed.",
                    ),
                ],
            );
            out.push(age());
        }
        ("", "Event") => {
            out = vec![
                col(
                    "Last Seen",
                    "string",
                    0,
                    "The time at which the most recent occurrence of this event was recorded.",
                ),
                col(
                    "Type",
                    "string",
                    0,
                    "Type of this event (Normal, Warning), new types could be added in the future.",
                ),
                col(
                    "Reason",
                    "string",
                    0,
                    "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
                ),
                col(
                    "Object",
                    "string",
                    0,
                    "The object that this event is about.",
                ),
                col(
                    "Message",
                    "string",
                    0,
                    "A human-readable description of the status of this operation.",
                ),
            ];
        }
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            out.push(col("Created At", "date", 0, AGE_DESC));
        }
        _ => out.push(age()),
    }
    out
}

/// `duration.HumanDuration` of `secs`.
pub fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    if secs < 0 {
        return "0s".into();
    }
    if secs < 120 {
        return format!("{secs}s");
    }
    let minutes = secs / 60;
    if minutes < 10 {
        let s = secs % 60;
        return if s == 0 {
            format!("{minutes}m")
        } else {
            format!("{minutes}m{s}s")
        };
    }
    if minutes < 180 {
        return format!("{minutes}m");
    }
    let hours = secs / 3600;
    if hours < 8 {
        let m = minutes % 60;
        return if m == 0 {
            format!("{hours}h")
        } else {
            format!("{hours}h{m}m")
        };
    }
    if hours < 48 {
        return format!("{hours}h");
    }
    if hours < 24 * 8 {
        let h = hours % 24;
        return if h == 0 {
            format!("{}d", hours / 24)
        } else {
            format!("{}d{h}h", hours / 24)
        };
    }
    if hours < 24 * 365 * 2 {
        return format!("{}d", hours / 24);
    }
    if hours < 24 * 365 * 8 {
        let dy = (hours / 24) % 365;
        return if dy == 0 {
            format!("{}y", hours / 24 / 365)
        } else {
            format!("{}y{dy}d", hours / 24 / 365)
        };
    }
    format!("{}y", hours / 24 / 365)
}

/// Seconds since the epoch of an RFC 3339 timestamp (`2024-01-02T03:04:05Z`, fractional
/// seconds and offsets allowed), or `None`.
pub fn parse_rfc3339(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let num = |r: std::ops::Range<usize>| s.get(r)?.parse::<i64>().ok();
    let (y, mo, d) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (h, mi, se) = (num(11..13)?, num(14..16)?, num(17..19)?);
    let mut rest = &s[19..];
    if let Some(r) = rest.strip_prefix('.') {
        rest = r.trim_start_matches(|c: char| c.is_ascii_digit());
    }
    let offset = match rest {
        "Z" | "z" => 0,
        r if r.len() == 6 && (r.starts_with('+') || r.starts_with('-')) => {
            let oh: i64 = r.get(1..3)?.parse().ok()?;
            let om: i64 = r.get(4..6)?.parse().ok()?;
            let o = oh * 3600 + om * 60;
            if r.starts_with('-') { -o } else { o }
        }
        _ => return None,
    };
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    // Howard Hinnant's days_from_civil.
    let y2 = if mo <= 2 { y - 1 } else { y };
    let era = y2.div_euclid(400);
    let yoe = y2 - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(days * 86_400 + h * 3600 + mi * 60 + se - offset)
}

/// The age of a timestamp value at `now` (`<unknown>` when absent).
fn age(ts: Option<&Value>, now: i64) -> Value {
    match ts.and_then(Value::as_str) {
        None | Some("") => json!("<unknown>"),
        Some(t) => match parse_rfc3339(t) {
            Some(secs) => json!(human_duration(now - secs)),
            None => json!("<invalid>"),
        },
    }
}

/// One step of a JSONPath.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    Field(String),
    Index(usize),
    All,
    /// `[?(@.path=="value")]` (or `!=`).
    Filter(Vec<Step>, bool, Value),
}

fn parse_steps(p: &str) -> Option<Vec<Step>> {
    let p = p.trim();
    let p = p
        .strip_prefix('{')
        .and_then(|x| x.strip_suffix('}'))
        .unwrap_or(p);
    let p = p.strip_prefix('$').unwrap_or(p);
    let mut steps = Vec::new();
    let mut rest = p;
    while !rest.is_empty() {
        if let Some(r) = rest.strip_prefix('.') {
            // A field name runs to the next unescaped `.` or `[`; `\.` is a literal dot.
            let mut name = String::new();
            let mut end = r.len();
            let mut chars = r.char_indices();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, n)) = chars.next() {
                            name.push(n);
                        }
                    }
                    '.' | '[' => {
                        end = i;
                        break;
                    }
                    c => name.push(c),
                }
            }
            if !name.is_empty() {
                steps.push(Step::Field(name));
            }
            rest = &r[end..];
        } else if let Some(r) = rest.strip_prefix("[?(") {
            let end = r.find(")]")?;
            let expr = &r[..end];
            rest = &r[end + 2..];
            let (lhs, ne, rhs) = if let Some((l, v)) = expr.split_once("!=") {
                (l, true, v)
            } else {
                let (l, v) = expr.split_once("==")?;
                (l, false, v)
            };
            let path = parse_steps(lhs.trim().strip_prefix('@')?)?;
            let rhs = rhs.trim();
            let value = if (rhs.starts_with('"') && rhs.ends_with('"'))
                || (rhs.starts_with('\'') && rhs.ends_with('\''))
            {
                json!(rhs.get(1..rhs.len().saturating_sub(1))?)
            } else {
                serde_json::from_str(rhs).ok()?
            };
            steps.push(Step::Filter(path, ne, value));
        } else if let Some(r) = rest.strip_prefix('[') {
            let end = r.find(']')?;
            let inner = r[..end].trim();
            rest = &r[end + 1..];
            if inner == "*" {
                steps.push(Step::All);
            } else if let Ok(i) = inner.parse::<usize>() {
                steps.push(Step::Index(i));
            } else {
                let name = inner.trim_matches(|c| c == '\'' || c == '"');
                steps.push(Step::Field(name.to_string()));
            }
        } else {
            return None;
        }
    }
    Some(steps)
}

fn eval<'a>(v: &'a Value, steps: &[Step], out: &mut Vec<&'a Value>) {
    let Some((first, rest)) = steps.split_first() else {
        out.push(v);
        return;
    };
    match first {
        Step::Field(f) => {
            if let Some(x) = v.get(f.as_str()) {
                eval(x, rest, out);
            }
        }
        Step::Index(i) => {
            if let Some(x) = v.as_array().and_then(|a| a.get(*i)) {
                eval(x, rest, out);
            }
        }
        Step::All => match v {
            Value::Array(a) => a.iter().for_each(|x| eval(x, rest, out)),
            Value::Object(m) => m.values().for_each(|x| eval(x, rest, out)),
            _ => {}
        },
        Step::Filter(path, ne, want) => {
            for x in v.as_array().into_iter().flatten() {
                let mut got = Vec::new();
                eval(x, path, &mut got);
                let hit = got.first().is_some_and(|g| *g == want);
                if hit != *ne && (!got.is_empty() || *ne) {
                    eval(x, rest, out);
                }
            }
        }
    }
}

/// The values a JSONPath (the CRD column subset) selects in `v`; `None` for a path it
/// cannot parse.
pub fn json_path<'a>(v: &'a Value, path: &str) -> Option<Vec<&'a Value>> {
    let steps = parse_steps(path)?;
    let mut out = Vec::new();
    eval(v, &steps, &mut out);
    Some(out)
}

/// How `jsonpath.PrintResults` prints a value (strings bare, others as JSON).
fn print_value(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// `cellForJSONValue` of the CRD table convertor.
fn typed_cell(kind: &str, v: &Value, now: i64) -> Value {
    match (kind, v) {
        ("integer", Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().map(|f| f as i64))
            .map_or(Value::Null, |i| json!(i)),
        ("number", Value::Number(n)) => n.as_f64().map_or(Value::Null, |f| json!(f)),
        ("boolean", Value::Bool(b)) => json!(b),
        ("string", v) => json!(print_value(v)),
        ("date", Value::String(_)) => age(Some(v), now),
        _ => Value::Null,
    }
}

fn s<'a>(o: &'a Value, p: &str) -> &'a str {
    o.pointer(p).and_then(Value::as_str).unwrap_or("")
}

fn or_none(x: &str) -> Value {
    json!(if x.is_empty() { "<none>" } else { x })
}

fn len_of(o: &Value, p: &str) -> usize {
    match o.pointer(p) {
        Some(Value::Object(m)) => m.len(),
        Some(Value::Array(a)) => a.len(),
        _ => 0,
    }
}

fn node_cells(o: &Value, now: i64) -> Vec<Value> {
    let conds = o.pointer("/status/conditions").and_then(Value::as_array);
    let ready = conds
        .into_iter()
        .flatten()
        .find(|c| c.get("type").and_then(Value::as_str) == Some("Ready"));
    let mut status = match ready.and_then(|c| c.get("status")).and_then(Value::as_str) {
        Some("True") => "Ready".to_string(),
        Some("False") => "NotReady".to_string(),
        Some(_) => "Unknown".to_string(),
        None => "Unknown".to_string(),
    };
    if o.pointer("/spec/unschedulable").and_then(Value::as_bool) == Some(true) {
        status.push_str(",SchedulingDisabled");
    }
    let mut roles: Vec<String> = Vec::new();
    if let Some(labels) = o.pointer("/metadata/labels").and_then(Value::as_object) {
        for (k, v) in labels {
            if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                if !r.is_empty() {
                    roles.push(r.to_string());
                }
            } else if k == "kubernetes.io/role"
                && let Some(v) = v.as_str()
                && !v.is_empty()
            {
                roles.push(v.to_string());
            }
        }
    }
    roles.sort();
    roles.dedup();
    let addr = |t: &str| {
        o.pointer("/status/addresses")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .find(|a| a.get("type").and_then(Value::as_str) == Some(t))
            .and_then(|a| a.get("address"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_string()
    };
    let os_image = s(o, "/status/nodeInfo/osImage");
    vec![
        json!(s(o, "/metadata/name")),
        json!(status),
        or_none(&roles.join(",")),
        age(o.pointer("/metadata/creationTimestamp"), now),
        json!(s(o, "/status/nodeInfo/kubeletVersion")),
        or_none(&addr("InternalIP")),
        or_none(&addr("ExternalIP")),
        json!(if os_image.is_empty() {
            "<unknown>"
        } else {
            os_image
        }),
        json!(if s(o, "/status/nodeInfo/kernelVersion").is_empty() {
            "<unknown>"
        } else {
            s(o, "/status/nodeInfo/kernelVersion")
        }),
        json!(
            if s(o, "/status/nodeInfo/containerRuntimeVersion").is_empty() {
                "<unknown>"
            } else {
                s(o, "/status/nodeInfo/containerRuntimeVersion")
            }
        ),
    ]
}

fn pod_cells(o: &Value, now: i64) -> Vec<Value> {
    let total = len_of(o, "/spec/containers");
    let statuses: Vec<&Value> = o
        .pointer("/status/containerStatuses")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let mut reason = s(o, "/status/phase").to_string();
    if !s(o, "/status/reason").is_empty() {
        reason = s(o, "/status/reason").to_string();
    }
    let (mut ready, mut restarts) = (0, 0);
    for c in statuses.iter().rev() {
        restarts += c.get("restartCount").and_then(Value::as_i64).unwrap_or(0);
        let waiting = s(c, "/state/waiting/reason");
        let terminated = s(c, "/state/terminated/reason");
        if !waiting.is_empty() {
            reason = waiting.to_string();
        } else if !terminated.is_empty() {
            reason = terminated.to_string();
        } else if c.pointer("/state/terminated").is_some() {
            let code = c
                .pointer("/state/terminated/exitCode")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            reason = format!("ExitCode:{code}");
        } else if c.get("ready").and_then(Value::as_bool) == Some(true)
            && c.pointer("/state/running").is_some()
        {
            ready += 1;
        }
    }
    if o.pointer("/metadata/deletionTimestamp").is_some() {
        reason = if s(o, "/status/reason") == "NodeLost" {
            "Unknown".into()
        } else {
            "Terminating".into()
        };
    }
    let gates = len_of(o, "/spec/readinessGates");
    let gates = if gates == 0 {
        "<none>".to_string()
    } else {
        let conds = o.pointer("/status/conditions").and_then(Value::as_array);
        let true_gates = o
            .pointer("/spec/readinessGates")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|g| {
                conds.into_iter().flatten().any(|c| {
                    c.get("type") == g.get("conditionType")
                        && c.get("status").and_then(Value::as_str) == Some("True")
                })
            })
            .count();
        format!("{true_gates}/{gates}")
    };
    vec![
        json!(s(o, "/metadata/name")),
        json!(format!("{ready}/{total}")),
        json!(reason),
        json!(restarts.to_string()),
        age(o.pointer("/metadata/creationTimestamp"), now),
        or_none(s(o, "/status/podIP")),
        or_none(s(o, "/spec/nodeName")),
        or_none(s(o, "/status/nominatedNodeName")),
        json!(gates),
    ]
}

fn job_cells(o: &Value, now: i64) -> Vec<Value> {
    let has = |t: &str| {
        o.pointer("/status/conditions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .any(|c| {
                c.get("type").and_then(Value::as_str) == Some(t)
                    && c.get("status").and_then(Value::as_str) == Some("True")
            })
    };
    let status = if has("Failed") {
        "Failed"
    } else if has("Complete") {
        "Complete"
    } else if has("Suspended") {
        "Suspended"
    } else if has("FailureTarget") {
        "FailureTarget"
    } else if has("SuccessCriteriaMet") {
        "SuccessCriteriaMet"
    } else if o.pointer("/metadata/deletionTimestamp").is_some() {
        "Terminating"
    } else {
        "Running"
    };
    let succeeded = o
        .pointer("/status/succeeded")
        .and_then(Value::as_i64)
        .unwrap_or(0);
    let completions = match o.pointer("/spec/completions").and_then(Value::as_i64) {
        Some(c) => format!("{succeeded}/{c}"),
        None => {
            let p = o
                .pointer("/spec/parallelism")
                .and_then(Value::as_i64)
                .unwrap_or(0);
            if p > 1 {
                format!("{succeeded}/1 of {p}")
            } else {
                format!("{succeeded}/1")
            }
        }
    };
    let start = o
        .pointer("/status/startTime")
        .and_then(Value::as_str)
        .and_then(parse_rfc3339);
    let end = o
        .pointer("/status/completionTime")
        .and_then(Value::as_str)
        .and_then(parse_rfc3339);
    let duration = match (start, end) {
        (None, _) => String::new(),
        (Some(s), None) => human_duration(now - s),
        (Some(s), Some(e)) => human_duration(e - s),
    };
    let containers: Vec<&Value> = o
        .pointer("/spec/template/spec/containers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .collect();
    let names: Vec<&str> = containers.iter().map(|c| s(c, "/name")).collect();
    let images: Vec<&str> = containers.iter().map(|c| s(c, "/image")).collect();
    let selector = o
        .pointer("/spec/selector/matchLabels")
        .and_then(Value::as_object)
        .map(|m| {
            m.iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or("")))
                .collect::<Vec<_>>()
                .join(",")
        })
        .unwrap_or_default();
    vec![
        json!(s(o, "/metadata/name")),
        json!(status),
        json!(completions),
        json!(duration),
        age(o.pointer("/metadata/creationTimestamp"), now),
        json!(names.join(",")),
        json!(images.join(",")),
        or_none(&selector),
    ]
}

fn int_or_string(v: Option<&Value>) -> Value {
    match v {
        Some(Value::Number(n)) => json!(n.to_string()),
        Some(Value::String(s)) => json!(s),
        _ => json!("N/A"),
    }
}

fn event_cells(o: &Value, now: i64) -> Vec<Value> {
    let last = [
        "/series/lastObservedTime",
        "/lastTimestamp",
        "/eventTime",
        "/metadata/creationTimestamp",
    ]
    .iter()
    .find_map(|p| {
        o.pointer(p)
            .filter(|v| v.as_str().is_some_and(|s| !s.is_empty()))
    });
    let kind = s(o, "/involvedObject/kind").to_lowercase();
    let object = format!("{kind}/{}", s(o, "/involvedObject/name"));
    vec![
        age(last, now),
        json!(s(o, "/type")),
        json!(s(o, "/reason")),
        json!(object),
        json!(s(o, "/message").trim()),
    ]
}

/// The cells of `o`'s row, one per [`columns`] entry.
pub fn cells(info: &ResourceInfo, cols: &[Column], o: &Value, now: i64) -> Vec<Value> {
    let name = json!(s(o, "/metadata/name"));
    let created = o.pointer("/metadata/creationTimestamp");
    if cols.iter().any(|c| c.path.is_some()) {
        return cols
            .iter()
            .map(|c| match &c.path {
                None => name.clone(),
                Some(p) => match json_path(o, p) {
                    Some(vs) => vs
                        .first()
                        .map_or(Value::Null, |v| typed_cell(&c.kind, v, now)),
                    None => Value::Null,
                },
            })
            .collect();
    }
    let age = age(created, now);
    match (info.group.as_str(), info.kind.as_str()) {
        ("", "Namespace") => vec![name, json!(s(o, "/status/phase")), age],
        ("", "ConfigMap") => vec![
            name,
            json!(len_of(o, "/data") + len_of(o, "/binaryData")),
            age,
        ],
        ("", "Secret") => vec![name, json!(s(o, "/type")), json!(len_of(o, "/data")), age],
        ("", "ServiceAccount") => vec![name, json!(len_of(o, "/secrets")), age],
        ("", "Node") => node_cells(o, now),
        ("", "Pod") => pod_cells(o, now),
        ("batch", "Job") => job_cells(o, now),
        ("coordination.k8s.io", "Lease") => {
            vec![name, or_none(s(o, "/spec/holderIdentity")), age]
        }
        ("policy", "PodDisruptionBudget") => vec![
            name,
            int_or_string(o.pointer("/spec/minAvailable")),
            int_or_string(o.pointer("/spec/maxUnavailable")),
            json!(
                o.pointer("/status/disruptionsAllowed")
                    .and_then(Value::as_i64)
                    .unwrap_or(0)
            ),
            age,
        ],
        ("", "Event") => event_cells(o, now),
        ("apiextensions.k8s.io", "CustomResourceDefinition") => {
            vec![name, created.cloned().unwrap_or(Value::Null)]
        }
        _ => vec![name, age],
    }
}

fn row_object(o: &Value, include: IncludeObject) -> Option<Value> {
    match include {
        IncludeObject::None => None,
        IncludeObject::Object => Some(o.clone()),
        IncludeObject::Metadata => Some(json!({
            "kind": "PartialObjectMetadata",
            "apiVersion": "meta.k8s.io/v1",
            "metadata": o.get("metadata").cloned().unwrap_or(json!({})),
        })),
    }
}

/// A `Table` of `objects`; `headers` false leaves out `columnDefinitions` (watch events
/// after the first, as the apiserver's watch encoder does). `list_meta` is the list's
/// `metadata` (`resourceVersion`, `continue`, `remainingItemCount`), or `{}` for one object.
pub fn table(
    info: &ResourceInfo,
    objects: &[Value],
    include: IncludeObject,
    list_meta: Value,
    headers: bool,
    now: i64,
) -> Value {
    let cols = columns(info);
    let defs: Vec<Value> = if headers {
        cols.iter()
            .map(|c| {
                json!({"name": c.name, "type": c.kind, "format": c.format,
                    "description": c.description, "priority": c.priority})
            })
            .collect()
    } else {
        vec![]
    };
    let rows: Vec<Value> = objects
        .iter()
        .map(|o| {
            let mut r = json!({"cells": cells(info, &cols, o, now)});
            if let Some(obj) = row_object(o, include) {
                r["object"] = obj;
            }
            r
        })
        .collect();
    json!({"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": list_meta,
        "columnDefinitions": defs, "rows": rows})
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::resource::{GroupResource, Registry};

    const NOW: i64 = 1_700_000_000;

    #[test]
    fn human_durations_as_apimachinery() {
        for (secs, want) in [
            (-5, "<invalid>"),
            (-1, "0s"),
            (0, "0s"),
            (119, "119s"),
            (120, "2m"),
            (125, "2m5s"),
            (600, "10m"),
            (179 * 60, "179m"),
            (3 * 3600, "3h"),
            (3 * 3600 + 60, "3h1m"),
            (47 * 3600, "47h"),
            (51 * 3600, "2d3h"),
            (8 * 86_400, "8d"),
            (730 * 86_400, "2y"),
            (731 * 86_400, "2y1d"),
            (3000 * 86_400, "8y"),
        ] {
            assert_eq!(human_duration(secs), want, "{secs}");
        }
    }

    #[test]
    fn rfc3339_round_trips() {
        for secs in [0, NOW, 951_782_400] {
            assert_eq!(parse_rfc3339(&crate::clock::rfc3339(secs)), Some(secs));
        }
        assert_eq!(
            parse_rfc3339("2023-11-14T22:13:20.5+01:00"),
            Some(NOW - 3600)
        );
        assert_eq!(parse_rfc3339("yesterday"), None);
    }

    #[test]
    fn json_paths_of_crd_columns() {
        let o = json!({"spec": {"x": 3, "l": [{"n": "a"}, {"n": "b"}]},
            "status": {"conditions": [{"type": "Updated", "status": "False"}, {"type": "Ready", "status": "True"}]}});
        let one = |p: &str| json_path(&o, p).unwrap().first().map(|v| (*v).clone());
        assert_eq!(one(".spec.x"), Some(json!(3)));
        assert_eq!(one(".spec.l[1].n"), Some(json!("b")));
        assert_eq!(one(".spec.l[*].n"), Some(json!("a")));
        assert_eq!(
            one(r#".status.conditions[?(@.type=="Ready")].status"#),
            Some(json!("True"))
        );
        assert_eq!(
            one(r#".status.conditions[?(@.type!="Ready")].status"#),
            Some(json!("False"))
        );
        assert_eq!(one(".spec.missing"), None);
        let a = json!({"metadata": {"annotations": {"a.b/c": "v"}}});
        assert_eq!(
            json_path(&a, r".metadata.annotations.a\.b/c").unwrap(),
            vec![&json!("v")]
        );
        assert_eq!(one(".spec.l[7]"), None);
        assert!(json_path(&o, "spec").is_none());
    }

    #[test]
    fn accept_headers() {
        assert!(wants_table(
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json"
        ));
        assert!(!wants_table("application/json, */*"));
        assert!(IncludeObject::parse(Some("Bogus")).is_err());
        assert_eq!(IncludeObject::parse(None).unwrap(), IncludeObject::Metadata);
    }

    fn crd_info(columns: Value) -> ResourceInfo {
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {"group": "example.com", "scope": "Cluster",
                "names": {"kind": "Widget", "plural": "widgets"},
                "versions": [{"name": "v1", "served": true, "storage": true,
                    "additionalPrinterColumns": columns,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        });
        ResourceInfo::from_crd(&crd).unwrap()
    }

    #[test]
    fn custom_resource_rows_follow_printer_columns() {
        let info = crd_info(json!([
            {"name": "Size", "type": "integer", "jsonPath": ".spec.size"},
            {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
            {"name": "Wide", "type": "boolean", "jsonPath": ".spec.on", "priority": 1},
            {"name": "Wrong", "type": "integer", "jsonPath": ".spec.on"}
        ]));
        let o = json!({"metadata": {"name": "w", "creationTimestamp": crate::clock::rfc3339(NOW - 300)},
            "spec": {"size": 2.0, "on": true},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}});
        let t = table(&info, &[o], IncludeObject::None, json!({}), true, NOW);
        let names: Vec<&str> = t["columnDefinitions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c["name"].as_str().unwrap())
            .collect();
        assert_eq!(names, ["Name", "Size", "Ready", "Age", "Wide", "Wrong"]);
        assert_eq!(t["columnDefinitions"][4]["priority"], 1);
        assert_eq!(
            t["rows"][0]["cells"],
            json!(["w", 2, "True", "5m", true, null])
        );
        assert!(t["rows"][0].get("object").is_none());
        // Without printer columns: Name and Age.
        let info = crd_info(json!([]));
        let o = json!({"metadata": {"name": "w", "creationTimestamp": crate::clock::rfc3339(NOW - 51 * 3600)}});
        let t = table(&info, &[o], IncludeObject::Metadata, json!({}), true, NOW);
        assert_eq!(t["rows"][0]["cells"], json!(["w", "2d3h"]));
        assert_eq!(t["rows"][0]["object"]["kind"], "PartialObjectMetadata");
    }

    #[test]
    fn builtin_rows() {
        let reg = Registry::builtin();
        let info = |g: &str, r: &str| reg.get(&GroupResource::new(g, r)).unwrap().clone();
        let ts = crate::clock::rfc3339(NOW - 60);
        let cases = vec![
            (
                info("", "configmaps"),
                json!({"metadata": {"name": "c", "creationTimestamp": ts}, "data": {"a": "1", "b": "2"}}),
                json!(["c", 2, "60s"]),
            ),
            (
                info("", "namespaces"),
                json!({"metadata": {"name": "n", "creationTimestamp": ts}, "status": {"phase": "Active"}}),
                json!(["n", "Active", "60s"]),
            ),
            (
                info("", "secrets"),
                json!({"metadata": {"name": "s", "creationTimestamp": ts}, "type": "Opaque", "data": {"a": "eA=="}}),
                json!(["s", "Opaque", 1, "60s"]),
            ),
            (
                info("", "nodes"),
                json!({"metadata": {"name": "n1", "creationTimestamp": ts,
                        "labels": {"node-role.kubernetes.io/worker": "", "node-role.kubernetes.io/master": ""}},
                    "spec": {"unschedulable": true},
                    "status": {"conditions": [{"type": "Ready", "status": "True"}],
                        "addresses": [{"type": "InternalIP", "address": "10.0.0.1"}],
                        "nodeInfo": {"kubeletVersion": "v1.32.0", "osImage": "RHCOS"}}}),
                json!([
                    "n1",
                    "Ready,SchedulingDisabled",
                    "master,worker",
                    "60s",
                    "v1.32.0",
                    "10.0.0.1",
                    "<none>",
                    "RHCOS",
                    "<unknown>",
                    "<unknown>"
                ]),
            ),
            (
                info("", "pods"),
                json!({"metadata": {"name": "p", "creationTimestamp": ts},
                    "spec": {"nodeName": "n1", "containers": [{"name": "a"}, {"name": "b"}]},
                    "status": {"phase": "Running", "podIP": "10.1.0.5", "containerStatuses": [
                        {"name": "a", "ready": true, "restartCount": 1, "state": {"running": {}}},
                        {"name": "b", "ready": false, "restartCount": 2, "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]}}),
                json!([
                    "p",
                    "1/2",
                    "CrashLoopBackOff",
                    "3",
                    "60s",
                    "10.1.0.5",
                    "n1",
                    "<none>",
                    "<none>"
                ]),
            ),
            (
                info("batch", "jobs"),
                json!({"metadata": {"name": "j", "creationTimestamp": ts},
                    "spec": {"completions": 1, "template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
                    "status": {"succeeded": 1, "startTime": ts, "completionTime": crate::clock::rfc3339(NOW - 30),
                        "conditions": [{"type": "Complete", "status": "True"}]}}),
                json!([
                    "j", "Complete", "1/1", "30s", "60s", "c", "busybox", "<none>"
                ]),
            ),
            (
                info("policy", "poddisruptionbudgets"),
                json!({"metadata": {"name": "b", "creationTimestamp": ts}, "spec": {"minAvailable": "50%"},
                    "status": {"disruptionsAllowed": 1}}),
                json!(["b", "50%", "N/A", 1, "60s"]),
            ),
            (
                info("coordination.k8s.io", "leases"),
                json!({"metadata": {"name": "l", "creationTimestamp": ts}, "spec": {}}),
                json!(["l", "<none>", "60s"]),
            ),
        ];
        for (info, o, want) in cases {
            let t = table(&info, &[o], IncludeObject::Object, json!({}), true, NOW);
            assert_eq!(t["rows"][0]["cells"], want, "{}", info.kind);
            assert_eq!(
                t["columnDefinitions"].as_array().unwrap().len(),
                want.as_array().unwrap().len(),
                "{}",
                info.kind
            );
            assert!(t["rows"][0]["object"]["metadata"].is_object());
        }
        // Without headers (watch events after the first).
        let t = table(
            &info("", "configmaps"),
            &[],
            IncludeObject::None,
            json!({}),
            false,
            NOW,
        );
        assert_eq!(t["columnDefinitions"], json!([]));
    }
}
