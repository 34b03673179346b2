//! What differs between two rendered MachineConfigs — machineos's and one the MCO rendered
//! (a file, or `kubectl get mc NAME -o json`): the check a user runs before switching.
//!
//! Compared: the name (the identity nodes, pools and builds are keyed on) and every field of
//! the spec. `spec.config` is compared as JSON, object keys by name, lists of objects keyed
//! the way Ignition merges them where they have a key (`files`, `directories`, `links` by
//! `path`, `units`, `users`, `groups`, … by `name`), so a reordered or missing entry reads as
//! such instead of as a shift of every later index; other lists by position. Annotations,
//! labels and owner references are left out: they name the controller and its version, and
//! differ between any two renderers by design. Pure: values in, [`Difference`]s out.

use machineos_api::v1::MachineConfig;
use serde_json::Value;

/// One difference, at a path such as `spec.config.storage.files[/etc/motd].mode`.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct Difference {
    /// Where, from the object's root; list entries by key (`[/etc/motd]`) or index (`[0]`).
    pub path: String,
    /// machineos's value (JSON), `None` when only the other side has it.
    pub ours: Option<String>,
    /// The other side's value (JSON), `None` when only machineos has it.
    pub theirs: Option<String>,
}

impl std::fmt::Display for Difference {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match (&self.ours, &self.theirs) {
            (Some(o), Some(t)) => write!(f, "{}: machineos {o}, given {t}", self.path),
            (Some(o), None) => write!(f, "{}: only in machineos's: {o}", self.path),
            (None, Some(t)) => write!(f, "{}: only in the given one: {t}", self.path),
            (None, None) => write!(f, "{}", self.path),
        }
    }
}

/// The differences between machineos's rendered MachineConfig and another, in path order.
pub fn diff(ours: &MachineConfig, theirs: &MachineConfig) -> Vec<Difference> {
    let mut out = Vec::new();
    if ours.name() != theirs.name() {
        out.push(Difference {
            path: "metadata.name".to_owned(),
            ours: Some(Value::String(ours.name().to_owned()).to_string()),
            theirs: Some(Value::String(theirs.name().to_owned()).to_string()),
        });
    }
    let spec = |mc: &MachineConfig| crate::go_json::spec_json(&mc.spec);
    compare("spec", &spec(ours), &spec(theirs), &mut out);
    out
}

/// The key Ignition merges a list's entries by, for the list at `path`.
fn list_key(path: &str) -> Option<&'static str> {
    let last = path.rsplit('.').next().unwrap_or(path);
    match last {
        "files" | "directories" | "links" => Some("path"),
        "units" | "dropins" | "users" | "groups" | "luks" | "raid" | "httpHeaders" => Some("name"),
        "disks" => Some("device"),
        "filesystems" => Some("device"),
        "merge" | "certificateAuthorities" | "append" => Some("source"),
        _ => None,
    }
}

fn compare(path: &str, ours: &Value, theirs: &Value, out: &mut Vec<Difference>) {
    match (ours, theirs) {
        (Value::Object(a), Value::Object(b)) => {
            let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
            keys.sort();
            keys.dedup();
            for k in keys {
                let p = format!("{path}.{k}");
                match (a.get(k), b.get(k)) {
                    (Some(x), Some(y)) => compare(&p, x, y, out),
                    (x, y) => out.push(Difference {
                        path: p,
                        ours: x.map(Value::to_string),
                        theirs: y.map(Value::to_string),
                    }),
                }
            }
        }
        (Value::Array(a), Value::Array(b)) => match list_key(path) {
            Some(key) if keyed(a, key) && keyed(b, key) => {
                // One index per side: linear in the list's length.
                let key_of = |v: &'_ Value| v[key].as_str().unwrap_or_default().to_owned();
                let index = |list: &'_ [Value]| -> std::collections::HashMap<String, usize> {
                    list.iter()
                        .enumerate()
                        .map(|(i, v)| (key_of(v), i))
                        .collect()
                };
                let (in_a, in_b) = (index(a), index(b));
                let mut keys: Vec<String> = a.iter().map(key_of).collect();
                keys.extend(b.iter().map(key_of).filter(|k| !in_a.contains_key(k)));
                let before = out.len();
                for k in keys {
                    let p = format!("{path}[{k}]");
                    match (in_a.get(&k).map(|&i| &a[i]), in_b.get(&k).map(|&i| &b[i])) {
                        (Some(x), Some(y)) => compare(&p, x, y, out),
                        (x, y) => out.push(Difference {
                            path: p,
                            ours: x.map(Value::to_string),
                            theirs: y.map(Value::to_string),
                        }),
                    }
                }
                let order = |list: &[Value]| list.iter().map(key_of).collect::<Vec<_>>();
                if out.len() == before && order(a) != order(b) {
                    out.push(Difference {
                        path: format!("{path} (order)"),
                        ours: Some(Value::from(order(a)).to_string()),
                        theirs: Some(Value::from(order(b)).to_string()),
                    });
                }
            }
            _ if a.len() == b.len() => {
                for (i, (x, y)) in a.iter().zip(b).enumerate() {
                    compare(&format!("{path}[{i}]"), x, y, out);
                }
            }
            _ => out.push(Difference {
                path: path.to_owned(),
                ours: Some(ours.to_string()),
                theirs: Some(theirs.to_string()),
            }),
        },
        _ if ours == theirs => {}
        _ => out.push(Difference {
            path: path.to_owned(),
            ours: Some(ours.to_string()),
            theirs: Some(theirs.to_string()),
        }),
    }
}

/// Every entry is an object with a distinct string `key`.
fn keyed(list: &[Value], key: &str) -> bool {
    let keys: Vec<&str> = list.iter().filter_map(|v| v.get(key)?.as_str()).collect();
    let mut distinct = keys.clone();
    distinct.sort_unstable();
    distinct.dedup();
    keys.len() == list.len() && distinct.len() == keys.len()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mc(name: &str, spec: Value) -> MachineConfig {
        serde_json::from_value(json!({"metadata": {"name": name}, "spec": spec})).expect("mc")
    }

    #[test]
    fn identical_configs_have_no_differences() {
        let spec = json!({"osImageURL": "a", "config": {"ignition": {"version": "3.5.0"}},
                          "kernelArguments": ["x"], "kernelType": "default"});
        assert_eq!(diff(&mc("r-1", spec.clone()), &mc("r-1", spec)), []);
    }

    #[test]
    fn differences_by_path_with_files_keyed_by_path() {
        let ours = mc(
            "rendered-worker-1",
            json!({"osImageURL": "a", "kernelArguments": ["x"], "config": {"ignition": {"version": "3.5.0"},
                "storage": {"files": [{"path": "/etc/a", "mode": 420}, {"path": "/etc/b"}]}}}),
        );
        let theirs = mc(
            "rendered-worker-2",
            json!({"osImageURL": "a", "kernelArguments": [], "config": {"ignition": {"version": "3.5.0"},
                "storage": {"files": [{"path": "/etc/c"}, {"path": "/etc/a", "mode": 384}]}}}),
        );
        let got: Vec<String> = diff(&ours, &theirs)
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            got,
            [
                r#"metadata.name: machineos "rendered-worker-1", given "rendered-worker-2""#,
                r#"spec.config.storage.files[/etc/a].mode: machineos 420, given 384"#,
                r#"spec.config.storage.files[/etc/b]: only in machineos's: {"path":"/etc/b"}"#,
                r#"spec.config.storage.files[/etc/c]: only in the given one: {"path":"/etc/c"}"#,
                r#"spec.kernelArguments: machineos ["x"], given []"#,
            ]
        );
    }

    #[test]
    fn reordered_entries_are_one_difference() {
        let files = |order: [&str; 2]| json!({"config": {"storage": {"files": [{"path": order[0]}, {"path": order[1]}]}}});
        let got = diff(&mc("r", files(["/a", "/b"])), &mc("r", files(["/b", "/a"])));
        assert_eq!(
            got,
            [Difference {
                path: "spec.config.storage.files (order)".into(),
                ours: Some(r#"["/a","/b"]"#.into()),
                theirs: Some(r#"["/b","/a"]"#.into()),
            }]
        );
    }
}
