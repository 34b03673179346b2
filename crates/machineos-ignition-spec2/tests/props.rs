//! Properties of the conversion on generated spec 2.2 configs: it is deterministic, bytes
//! and parsed JSON convert alike, the result is a config machineos-ignition accepts, and the
//! MCO's duplicate resolution (`removeIgnDuplicateFilesUnitsUsers`) holds: last entry wins,
//! kept entries newest first, drop-ins merged, SSH keys merged newest user first and
//! de-duplicated.

use machineos_ignition_spec2::{convert, convert_value};
use proptest::prelude::*;
use serde_json::{Value, json};

const PATHS: [&str; 4] = ["/etc/a", "/etc/b", "/var/c", "/etc/d/e"];
const UNITS: [&str; 3] = ["a.service", "b.timer", "c.socket"];
const DROPINS: [&str; 3] = ["10-a.conf", "20-b.conf", "30-c.conf"];
const CONTENTS: [&str; 3] = [
    "[Unit]\nDescription=x\n",
    "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
    "",
];

#[derive(Debug, Clone)]
struct File {
    path: usize,
    data: String,
    mode: i64,
}

#[derive(Debug, Clone)]
struct Unit {
    name: usize,
    contents: usize,
    enabled: Option<bool>,
    /// Drop-in names (indices, distinct) and their contents.
    dropins: Vec<(usize, usize)>,
}

fn file() -> impl Strategy<Value = File> {
    (0..PATHS.len(), "[a-z0-9]{0,6}", 0o400i64..=0o777).prop_map(|(path, data, mode)| File {
        path,
        data,
        mode,
    })
}

fn unit() -> impl Strategy<Value = Unit> {
    (
        0..UNITS.len(),
        0..CONTENTS.len(),
        proptest::option::of(any::<bool>()),
        proptest::sample::subsequence(vec![0usize, 1, 2], 0..=3),
        proptest::collection::vec(0..CONTENTS.len(), 3),
    )
        .prop_map(|(name, contents, enabled, names, dcontents)| Unit {
            name,
            contents,
            enabled,
            dropins: names.into_iter().zip(dcontents).collect(),
        })
}

fn keys() -> impl Strategy<Value = Vec<Vec<String>>> {
    proptest::collection::vec(proptest::collection::vec("k[0-4]", 0..4), 0..4)
}

fn config(files: &[File], units: &[Unit], users: &[Vec<String>]) -> Value {
    json!({
        "ignition": {"version": "2.2.0"},
        "storage": {"files": files.iter().map(|f| json!({
            "filesystem": "root",
            "path": PATHS[f.path],
            "mode": f.mode,
            "contents": {"source": format!("data:,{}", f.data)},
        })).collect::<Vec<_>>()},
        "systemd": {"units": units.iter().map(|u| {
            let mut v = json!({
                "name": UNITS[u.name],
                "contents": CONTENTS[u.contents],
                "dropins": u.dropins.iter().map(|(n, c)| json!({
                    "name": DROPINS[*n], "contents": CONTENTS[*c],
                })).collect::<Vec<_>>(),
            });
            if let (Some(e), Some(obj)) = (u.enabled, v.as_object_mut()) {
                obj.insert("enabled".into(), json!(e));
            }
            v
        }).collect::<Vec<_>>()},
        "passwd": {"users": users.iter().map(|k| json!({"name": "core", "sshAuthorizedKeys": k}))
            .collect::<Vec<_>>()},
    })
}

/// What the MCO keeps: newest entry of each key, newest first.
fn last_wins<T: Clone, K: PartialEq>(items: &[T], key: impl Fn(&T) -> K) -> Vec<T> {
    let mut out: Vec<T> = Vec::new();
    for item in items.iter().rev() {
        if !out.iter().any(|o| key(o) == key(item)) {
            out.push(item.clone());
        }
    }
    out
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn deterministic_and_accepted(
        files in proptest::collection::vec(file(), 0..6),
        units in proptest::collection::vec(unit(), 0..5),
        users in keys(),
    ) {
        let cfg = config(&files, &units, &users);
        let bytes = serde_json::to_vec(&cfg).unwrap_or_default();
        let first = convert(&bytes);
        prop_assert_eq!(&first, &convert(&bytes));
        prop_assert_eq!(&first, &convert_value(&cfg));
        let out = match first {
            Ok(c) => c,
            Err(e) => return Err(TestCaseError::fail(format!("{cfg}: {e}"))),
        };
        let out_bytes = serde_json::to_vec(&out.config).unwrap_or_default();
        prop_assert!(machineos_ignition::parse(&out_bytes).is_ok(), "{}", out.config);
        // Serializing is stable too (the MCO's key order, every time).
        prop_assert_eq!(serde_json::to_vec(&out.config).unwrap_or_default(), out_bytes);
    }

    #[test]
    fn files_last_wins_newest_first(files in proptest::collection::vec(file(), 0..8)) {
        let cfg = config(&files, &[], &[]);
        let got = convert_value(&cfg).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let want: Vec<Value> = last_wins(&files, |f| f.path)
            .iter()
            .map(|f| json!({
                "overwrite": true,
                "path": PATHS[f.path],
                "contents": {"source": format!("data:,{}", f.data)},
                "mode": f.mode,
            }))
            .collect();
        let got_files = got.config.pointer("/storage/files").cloned().unwrap_or(json!([]));
        prop_assert_eq!(got_files, Value::Array(want));
    }

    #[test]
    fn units_last_wins_dropins_merged(units in proptest::collection::vec(unit(), 0..6)) {
        let cfg = config(&[], &units, &[]);
        let got = convert_value(&cfg).map_err(|e| TestCaseError::fail(e.to_string()))?;
        // The newest entry of each name, with the drop-ins of older entries it lacks
        // appended, newest entry first.
        let mut want: Vec<Unit> = Vec::new();
        for u in units.iter().rev() {
            match want.iter_mut().find(|w| w.name == u.name) {
                None => want.push(u.clone()),
                Some(kept) => {
                    for d in &u.dropins {
                        if !kept.dropins.iter().any(|k| k.0 == d.0) {
                            kept.dropins.push(*d);
                        }
                    }
                }
            }
        }
        let got_units = got.config.pointer("/systemd/units").cloned().unwrap_or(json!([]));
        let names: Vec<&str> = got_units
            .as_array()
            .map(|a| a.iter().filter_map(|u| u["name"].as_str()).collect())
            .unwrap_or_default();
        let want_names: Vec<&str> = want.iter().map(|u| UNITS[u.name]).collect();
        prop_assert_eq!(names, want_names);
        for (g, w) in got_units.as_array().into_iter().flatten().zip(&want) {
            let contents = (!CONTENTS[w.contents].is_empty()).then(|| json!(CONTENTS[w.contents]));
            prop_assert_eq!(g.get("contents"), contents.as_ref());
            let enabled = w.enabled.map(Value::Bool);
            prop_assert_eq!(g.get("enabled"), enabled.as_ref());
            let dropins: Vec<&str> = g["dropins"]
                .as_array()
                .map(|a| a.iter().filter_map(|d| d["name"].as_str()).collect())
                .unwrap_or_default();
            let want_dropins: Vec<&str> = w.dropins.iter().map(|d| DROPINS[d.0]).collect();
            prop_assert_eq!(dropins, want_dropins);
        }
    }

    #[test]
    fn ssh_keys_merged_newest_first_once(users in keys()) {
        let cfg = config(&[], &[], &users);
        let got = convert_value(&cfg).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut want: Vec<String> = Vec::new();
        for k in users.iter().rev().flatten() {
            if !want.contains(k) {
                want.push(k.clone());
            }
        }
        let got_users = got.config.pointer("/passwd/users").cloned();
        if users.is_empty() {
            prop_assert_eq!(got_users, None);
        } else {
            let got_keys = got.config.pointer("/passwd/users/0/sshAuthorizedKeys").cloned();
            let want_keys = (!want.is_empty()).then(|| json!(want));
            prop_assert_eq!(got_keys, want_keys);
            prop_assert_eq!(got_users.and_then(|u| u.as_array().map(Vec::len)), Some(1));
        }
    }
}
