//! Ignition's merge of a child config over a parent (the rules of `config/merge`), used
//! for `ignition.config.merge` and for the MCO's rendering of several MachineConfigs.
//!
//! Implemented over the JSON form of the 3.6.0 model with a table of keyed lists, so the
//! rules read as data: structs merge field-wise (a child's `null`/absent keeps the
//! parent's), keyed lists merge entry-wise by key, `append` lists concatenate, primitive
//! lists become order-preserving unions, and files/directories/links share one key space.

use serde_json::{Map, Value};

use crate::model::Config;

/// How the elements of a list at a given path are merged.
#[derive(Debug, Clone, Copy)]
enum ListKind {
    /// Structs keyed by a field; matching entries merge field-wise.
    Keyed(fn(&Value) -> String),
    /// Concatenated, duplicates kept (`IgnoreDuplicates`).
    Concat,
    /// Primitive values: union, parent order then new child values.
    Union,
}

fn field(name: &'static str) -> impl Fn(&Value) -> String {
    move |v| v.get(name).map(|k| k.to_string()).unwrap_or_default()
}

fn key_path(v: &Value) -> String {
    field("path")(v)
}
fn key_name(v: &Value) -> String {
    field("name")(v)
}
fn key_device(v: &Value) -> String {
    field("device")(v)
}
fn key_source(v: &Value) -> String {
    field("source")(v)
}
fn key_url(v: &Value) -> String {
    field("url")(v)
}
fn key_partition(v: &Value) -> String {
    match v.get("number").and_then(Value::as_i64) {
        Some(n) if n != 0 => format!("number:{n}"),
        _ => format!("label:{}", field("label")(v)),
    }
}

/// The list rules, by path from the root (`*` is any list index).
fn list_kind(path: &[&str]) -> ListKind {
    use ListKind::*;
    match path {
        ["storage", "files" | "directories" | "links"] => Keyed(key_path),
        ["storage", "files", "*", "append"] => Concat,
        ["systemd", "units"] | ["systemd", "units", "*", "dropins"] => Keyed(key_name),
        ["passwd", "users" | "groups"] => Keyed(key_name),
        ["storage", "raid" | "luks"] => Keyed(key_name),
        ["storage", "disks" | "filesystems"] => Keyed(key_device),
        ["storage", "disks", "*", "partitions"] => Keyed(key_partition),
        ["storage", "luks", "*", "clevis", "tang"] => Keyed(key_url),
        ["ignition", "config", "merge"]
        | ["ignition", "security", "tls", "certificateAuthorities"] => Keyed(key_source),
        [.., "httpHeaders"] => Keyed(key_name),
        _ => Union,
    }
}

/// Merge `child` over `parent` with Ignition's rules.
///
/// As with Ignition, two valid configs can merge into an invalid one: fields merge one by one,
/// so a parent's `user.name` and a child's `user.id` on the same file end up side by side.
/// Validate the result where that matters.
pub fn merge(parent: &Config, child: &Config) -> Config {
    let p = serde_json::to_value(parent).expect("config serializes");
    let c = serde_json::to_value(child).expect("config serializes");
    let merged = merge_values(&p, &c);
    serde_json::from_value(merged).expect("a merge of two configs has the model's shape")
}

/// Merge two configs in JSON form (3.6.0 model shape) with Ignition's rules.
pub fn merge_values(parent: &Value, child: &Value) -> Value {
    let mut out = parent.clone();
    merge_values_into(&mut out, child);
    out
}

/// [`merge_values`] in place: `parent` becomes the merge, and only what `child` adds is
/// copied — so folding many configs (a pool's MachineConfigs) copies each once.
pub fn merge_values_into(parent: &mut Value, child: &Value) {
    let sections = SHARED_KEY_SPACES
        .map(|(section, _, _)| matches!(parent.get(section), Some(Value::Object(_))));
    merge_into(parent, child, &mut Vec::new());
    shared_key_spaces(sections, child, parent);
}

fn merge_into(parent: &mut Value, child: &Value, path: &mut Vec<String>) {
    match (parent, child) {
        (_, Value::Null) => {}
        (Value::Object(p), Value::Object(c)) => {
            for (k, cv) in c {
                if cv.is_null() {
                    continue;
                }
                match p.get_mut(k) {
                    Some(pv) => {
                        path.push(k.clone());
                        merge_into(pv, cv, path);
                        path.pop();
                    }
                    None => {
                        p.insert(k.clone(), cv.clone());
                    }
                }
            }
        }
        (Value::Array(p), Value::Array(c)) => {
            let names: Vec<&str> = path.iter().map(String::as_str).collect();
            let kind = list_kind(&names);
            merge_list_into(p, c, kind, path);
        }
        (p, c) => *p = c.clone(),
    }
}

fn merge_list_into(
    parent: &mut Vec<Value>,
    child: &[Value],
    kind: ListKind,
    path: &mut Vec<String>,
) {
    match kind {
        ListKind::Concat => parent.extend(child.iter().cloned()),
        ListKind::Union => {
            for c in child {
                if !parent.contains(c) {
                    parent.push(c.clone());
                }
            }
        }
        ListKind::Keyed(key) => {
            let child_keys: Vec<String> = child.iter().map(key).collect();
            let mut used = vec![false; child.len()];
            path.push("*".into());
            for p in parent.iter_mut() {
                let k = key(p);
                if let Some(i) = child_keys.iter().position(|c| *c == k) {
                    used[i] = true;
                    merge_into(p, &child[i], path);
                }
            }
            path.pop();
            parent.extend(
                child
                    .iter()
                    .zip(used)
                    .filter(|(_, u)| !u)
                    .map(|(c, _)| c.clone()),
            );
        }
    }
}

type KeyFn = fn(&Value) -> String;

/// The lists that share a key space, by section.
const SHARED_KEY_SPACES: [(&str, &[&str], KeyFn); 2] = [
    ("storage", &["files", "directories", "links"], key_path),
    ("kernelArguments", &["shouldExist", "shouldNotExist"], |v| {
        v.to_string()
    }),
];

/// Lists that share a key space: an entry the child defines in one list removes the
/// parent's entry with the same key from the others. `parent_had` says, per
/// [`SHARED_KEY_SPACES`] section, whether the parent had it (as an object).
fn shared_key_spaces(parent_had: [bool; 2], child: &Value, out: &mut Value) {
    for ((section, lists, key), had) in SHARED_KEY_SPACES.iter().zip(parent_had) {
        let (true, Some(Value::Object(c)), Some(Value::Object(o))) =
            (had, child.get(section), out.get_mut(*section))
        else {
            continue;
        };
        for list in *lists {
            let child_keys: Vec<String> = c
                .get(*list)
                .and_then(Value::as_array)
                .map(|a| a.iter().map(key).collect())
                .unwrap_or_default();
            if child_keys.is_empty() {
                continue;
            }
            for other in lists.iter().filter(|l| *l != list) {
                if let Some(Value::Array(items)) = o.get_mut(*other) {
                    let child_other: Vec<String> = c
                        .get(*other)
                        .and_then(Value::as_array)
                        .map(|a| a.iter().map(key).collect())
                        .unwrap_or_default();
                    // Only entries that came from the parent are displaced.
                    items.retain(|v| {
                        let k = key(v);
                        !child_keys.contains(&k) || child_other.contains(&k)
                    });
                }
            }
        }
        remove_empty(o);
    }
}

fn remove_empty(o: &mut Map<String, Value>) {
    o.retain(|_, v| !matches!(v, Value::Array(a) if a.is_empty()));
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn m(p: Value, c: Value) -> Value {
        merge_values(&p, &c)
    }

    #[test]
    fn rules() {
        // Field-wise merge of a keyed entry; parent order kept; new child entries appended.
        assert_eq!(
            m(
                json!({"storage":{"files":[{"path":"/a","mode":420},{"path":"/b"}]}}),
                json!({"storage":{"files":[{"path":"/c"},{"path":"/a","contents":{"source":"data:,x"}}]}})
            ),
            json!({"storage":{"files":[{"path":"/a","mode":420,"contents":{"source":"data:,x"}},{"path":"/b"},{"path":"/c"}]}})
        );
        // A child's null keeps the parent's value.
        assert_eq!(
            m(
                json!({"storage":{"files":[{"path":"/a","mode":420}]}}),
                json!({"storage":{"files":[{"path":"/a","mode":null}]}})
            ),
            json!({"storage":{"files":[{"path":"/a","mode":420}]}})
        );
        // Same path in another list: parent's entry removed, child's appended to its list.
        assert_eq!(
            m(
                json!({"storage":{"files":[{"path":"/a"},{"path":"/b"}]}}),
                json!({"storage":{"directories":[{"path":"/a"}]}})
            ),
            json!({"storage":{"files":[{"path":"/b"}],"directories":[{"path":"/a"}]}})
        );
        // append concatenates.
        assert_eq!(
            m(
                json!({"storage":{"files":[{"path":"/a","append":[{"source":"data:,1"}]}]}}),
                json!({"storage":{"files":[{"path":"/a","append":[{"source":"data:,1"},{"source":"data:,2"}]}]}})
            ),
            json!({"storage":{"files":[{"path":"/a","append":[{"source":"data:,1"},{"source":"data:,1"},{"source":"data:,2"}]}]}})
        );
        // Units and drop-ins keyed by name; primitive lists are unions.
        assert_eq!(
            m(
                json!({"systemd":{"units":[{"name":"a.service","enabled":true,"dropins":[{"name":"x.conf","contents":"1"}]}]},
                       "passwd":{"users":[{"name":"core","sshAuthorizedKeys":["k1","k2"]}]}}),
                json!({"systemd":{"units":[{"name":"a.service","dropins":[{"name":"x.conf","contents":"2"},{"name":"y.conf"}]}]},
                       "passwd":{"users":[{"name":"core","sshAuthorizedKeys":["k2","k3"]}]}})
            ),
            json!({"systemd":{"units":[{"name":"a.service","enabled":true,"dropins":[{"name":"x.conf","contents":"2"},{"name":"y.conf"}]}]},
                   "passwd":{"users":[{"name":"core","sshAuthorizedKeys":["k1","k2","k3"]}]}})
        );
        // kernelArguments share a key space.
        assert_eq!(
            m(
                json!({"kernelArguments":{"shouldExist":["a","b"]}}),
                json!({"kernelArguments":{"shouldNotExist":["a"]}})
            ),
            json!({"kernelArguments":{"shouldExist":["b"],"shouldNotExist":["a"]}})
        );
        // Scalars: the child wins.
        assert_eq!(
            m(
                json!({"ignition":{"version":"3.0.0"}}),
                json!({"ignition":{"version":"3.5.0"}})
            ),
            json!({"ignition":{"version":"3.5.0"}})
        );
    }

    #[test]
    fn typed_merge_roundtrips() {
        let p = crate::parse(br#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/a","overwrite":false}]}}"#).unwrap().config;
        let c = crate::parse(
            br#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/a","mode":384}]}}"#,
        )
        .unwrap()
        .config;
        let out = merge(&p, &c);
        assert_eq!(out.storage.files[0].mode, Some(384));
        assert_eq!(out.storage.files[0].overwrite, Some(false));
    }

    #[test]
    fn modes_merge_as_parsed() {
        // 3.6.0 adds no list, so no merge rule; modes are scalars, special bits included.
        let parent = br#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/a","mode":2541},{"path":"/b","mode":2541}],"directories":[{"path":"/d","mode":1023}]}}"#;
        let child =
            br#"{"ignition":{"version":"3.6.0"},"storage":{"files":[{"path":"/a","mode":3565}]}}"#;
        let modes = |c: &Config| {
            let files = c.storage.files.iter().map(|f| f.mode);
            files
                .chain(c.storage.directories.iter().map(|d| d.mode))
                .collect::<Vec<_>>()
        };
        let child_parsed = crate::parse(child).unwrap().config;
        // parse: the 3.5.0 parent's bits are masked; the 3.6.0 child's are kept.
        let out = merge(&crate::parse(parent).unwrap().config, &child_parsed);
        assert_eq!(modes(&out), [Some(0o6755), Some(0o755), Some(0o777)]);
        assert_eq!(out.ignition.version.as_deref(), Some("3.6.0"));
        // parse_unmasked: every mode as written.
        let out = merge(
            &crate::parse_unmasked(parent).unwrap().config,
            &child_parsed,
        );
        assert_eq!(modes(&out), [Some(0o6755), Some(0o4755), Some(0o1777)]);
    }
}
