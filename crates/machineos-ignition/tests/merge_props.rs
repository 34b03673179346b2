//! Properties of [`machineos_ignition::merge::merge`] over generated valid configs (files with
//! contents, append fragments, modes and owners; directories; symbolic and hard links; users
//! and groups; systemd units with drop-ins; kernel arguments — no child config references).
//!
//! What Ignition's merge rules promise, and so what is checked:
//!
//! * merging never panics, and an empty config is an identity on either side;
//! * the child wins entry by entry: in a keyed entry present in both configs, every field
//!   the child sets is the child's, every field it leaves unset is the parent's; `append`
//!   lists concatenate, primitive lists are unions, drop-ins merge by name; parent entries
//!   keep their order and new child entries follow;
//! * files, directories and links share one key space: a path the child defines in one list
//!   leaves the other two;
//! * merge is associative — as long as no path changes kind (file, directory, link) between
//!   the three configs: a change of kind drops the parent's entry whole, so which fields
//!   survive depends on the grouping (see `associativity_needs_paths_to_keep_their_kind`);
//! * two valid configs merge into a valid one — as long as their owners do not mix `id` and
//!   `name`. Ignition's merge says so itself ("it is possible to merge two valid configs and
//!   get an invalid config"): struct fields merge one by one, so a parent's `user.name` and a
//!   child's `user.id` end up side by side, which validation refuses, as Ignition's does (see
//!   `owners_by_id_and_by_name_merge_into_an_invalid_config`). The generators name users by
//!   name and groups by id, and keep paths flat (no link is a prefix of another node, no hard
//!   link points at a directory) and HTTP headers out, which validity after merging needs
//!   for the same reason.

use std::collections::BTreeMap;

use machineos_ignition::merge::merge;
use machineos_ignition::model::{
    Config, Directory, Dropin, File, KernelArguments, Link, NodeGroup, NodeUser, Passwd,
    PasswdGroup, PasswdUser, Resource, Storage, Systemd, Unit, Verification,
};
use machineos_ignition::{ValidationError, validate};
use proptest::collection::{btree_map, vec};
use proptest::option;
use proptest::prelude::*;
use serde_json::{Map, Value};

const VERSION: &str = "3.6.0";

fn base64(b: &[u8]) -> String {
    use base64::Engine;
    base64::engine::general_purpose::STANDARD.encode(b)
}

fn source() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]{0,8}".prop_map(|s| format!("data:,{s}")),
        vec(any::<u8>(), 0..12).prop_map(|b| format!("data:;base64,{}", base64(&b))),
        // Remote schemes validate; only fetching them is refused.
        Just("https://example.com/file".to_string()),
    ]
}

fn resource() -> impl Strategy<Value = Resource> {
    (
        source(),
        option::of(prop_oneof![Just(String::new()), Just("gzip".to_string())]),
        option::of(prop_oneof!["sha256-[0-9a-f]{64}", "sha512-[0-9a-f]{128}"]),
    )
        .prop_map(|(source, compression, hash)| Resource {
            compression,
            source: Some(source.into()),
            verification: Verification { hash },
            ..Default::default()
        })
}

/// Owners: users by name, groups by id (see the module documentation).
fn owner() -> impl Strategy<Value = (NodeUser, NodeGroup)> {
    (
        option::of(prop_oneof![Just("core"), Just("root")]),
        option::of(0i64..2000),
    )
        .prop_map(|(user, group)| {
            (
                NodeUser {
                    name: user.map(str::to_string),
                    ..Default::default()
                },
                NodeGroup {
                    id: group,
                    ..Default::default()
                },
            )
        })
}

fn mode() -> impl Strategy<Value = Option<i64>> {
    option::of(0i64..=0o7777)
}

fn file(path: String) -> impl Strategy<Value = File> {
    (
        option::of(resource()),
        any::<Option<bool>>(),
        vec(resource(), 0..3),
        mode(),
        owner(),
    )
        .prop_map(move |(contents, overwrite, append, mode, (user, group))| {
            // `overwrite: true` needs contents.
            let overwrite = overwrite.filter(|o| !*o || contents.is_some());
            File {
                path: path.clone(),
                overwrite,
                user,
                group,
                contents: contents.unwrap_or_default(),
                append,
                mode,
            }
        })
}

fn directory(path: String) -> impl Strategy<Value = Directory> {
    (any::<Option<bool>>(), mode(), owner()).prop_map(move |(overwrite, mode, (user, group))| {
        Directory {
            path: path.clone(),
            overwrite,
            user,
            group,
            mode,
        }
    })
}

fn link(path: String) -> impl Strategy<Value = Link> {
    (
        // Never a directory: directories are /etc/nK.
        prop_oneof![
            (0..4u8).prop_map(|t| format!("/usr/t{t}")),
            (0..4u8).prop_map(|t| format!("t{t}"))
        ],
        any::<Option<bool>>(),
        any::<Option<bool>>(),
        owner(),
    )
        .prop_map(move |(target, hard, overwrite, (user, group))| Link {
            path: path.clone(),
            overwrite,
            user,
            group,
            target: Some(target),
            hard,
        })
}

/// A node of `storage`: which list it goes to, and its entry.
#[derive(Debug, Clone)]
enum Node {
    File(File),
    Directory(Directory),
    Link(Link),
}

/// Nodes at `/etc/n0` … `/etc/n8`. With `fixed_kinds`, a path's kind is a function of the
/// path (so it is the same in every generated config); else any path can be any kind.
fn nodes(fixed_kinds: bool) -> impl Strategy<Value = Vec<Node>> {
    btree_map(0..9u8, 0..3u8, 0..6)
        .prop_flat_map(move |picked| {
            picked
                .into_iter()
                .map(|(k, kind)| {
                    let path = format!("/etc/n{k}");
                    match if fixed_kinds { k % 3 } else { kind } {
                        0 => file(path).prop_map(Node::File).boxed(),
                        1 => directory(path).prop_map(Node::Directory).boxed(),
                        _ => link(path).prop_map(Node::Link).boxed(),
                    }
                })
                .collect::<Vec<_>>()
        })
        .prop_shuffle()
}

const UNIT_CONTENTS: &[&str] = &[
    "",
    "[Unit]\nDescription=x\n",
    "[Service]\nExecStart=/bin/true\n[Install]\nWantedBy=multi-user.target\n",
];

fn unit_contents() -> impl Strategy<Value = Option<String>> {
    option::of(proptest::sample::select(UNIT_CONTENTS).prop_map(str::to_string))
}

fn units() -> impl Strategy<Value = Vec<Unit>> {
    let names = ["a.service", "b.socket", "c.timer", "d.mount"];
    let dropins = btree_map(0..3u8, unit_contents(), 0..3).prop_map(|m| {
        m.into_iter()
            .map(|(k, contents)| Dropin {
                name: format!("{k}-override.conf"),
                contents,
            })
            .collect::<Vec<_>>()
    });
    let unit = (
        any::<Option<bool>>(),
        any::<Option<bool>>(),
        unit_contents(),
        dropins,
    );
    btree_map(0..names.len(), unit, 0..3)
        .prop_map(move |m| {
            m.into_iter()
                .map(|(k, (enabled, mask, contents, dropins))| Unit {
                    name: names[k].to_string(),
                    enabled,
                    mask,
                    contents,
                    dropins,
                })
                .collect::<Vec<_>>()
        })
        .prop_shuffle()
}

/// A list of primitives without duplicates, in any order. (Within one list, a duplicate is
/// kept by Ignition's merge, which only compares a child's values with the parent's; this
/// crate's merge drops it when the parent has the list — a corner left out here.)
fn distinct(
    values: &'static [&'static str],
    len: std::ops::Range<usize>,
) -> impl Strategy<Value = Vec<String>> {
    proptest::sample::subsequence(values, len)
        .prop_shuffle()
        .prop_map(|v| v.into_iter().map(str::to_string).collect())
}

fn passwd() -> impl Strategy<Value = Passwd> {
    let keys = distinct(
        &["ssh-ed25519 AAAA a", "ssh-ed25519 BBBB b", "ssh-rsa CCCC c"],
        0..3,
    );
    let groups = distinct(&["wheel", "docker"], 0..2);
    let user = (
        option::of(1000i64..1010),
        keys,
        groups,
        option::of(prop_oneof![Just("/bin/bash"), Just("/bin/sh")]),
        option::of("\\$6\\$[a-z]{4}"),
    );
    let names = ["core", "alice", "bob"];
    let users = btree_map(0..names.len(), user, 0..3).prop_map(move |m| {
        m.into_iter()
            .map(|(k, (uid, keys, groups, shell, hash))| PasswdUser {
                name: names[k].to_string(),
                uid,
                ssh_authorized_keys: keys,
                groups,
                shell: shell.map(str::to_string),
                password_hash: hash,
                ..Default::default()
            })
            .collect::<Vec<_>>()
    });
    let group_names = ["wheel", "docker"];
    let groups = btree_map(
        0..group_names.len(),
        (option::of(100i64..110), any::<Option<bool>>()),
        0..2,
    )
    .prop_map(move |m| {
        m.into_iter()
            .map(|(k, (gid, system))| PasswdGroup {
                name: group_names[k].to_string(),
                gid,
                system,
                ..Default::default()
            })
            .collect::<Vec<_>>()
    });
    (users, groups).prop_map(|(users, groups)| Passwd { users, groups })
}

fn kernel_arguments() -> impl Strategy<Value = KernelArguments> {
    // Disjoint sets: an argument moving between the two lists reorders them (see
    // `associativity_needs_paths_to_keep_their_kind`, the same rule).
    (
        distinct(&["quiet", "a=1", "b"], 0..3),
        distinct(&["debug", "c=2"], 0..2),
    )
        .prop_map(|(should_exist, should_not_exist)| KernelArguments {
            should_exist,
            should_not_exist,
        })
}

fn config(fixed_kinds: bool) -> impl Strategy<Value = Config> {
    (nodes(fixed_kinds), units(), passwd(), kernel_arguments()).prop_map(
        |(nodes, units, passwd, kernel_arguments)| {
            let mut storage = Storage::default();
            for n in nodes {
                match n {
                    Node::File(f) => storage.files.push(f),
                    Node::Directory(d) => storage.directories.push(d),
                    Node::Link(l) => storage.links.push(l),
                }
            }
            let mut c = Config {
                kernel_arguments,
                passwd,
                storage,
                systemd: Systemd { units },
                ..Default::default()
            };
            c.ignition.version = Some(VERSION.to_string());
            c
        },
    )
}

/// A generated config, checked valid (else the generator is wrong, not the merge).
fn valid(fixed_kinds: bool) -> impl Strategy<Value = Config> {
    config(fixed_kinds).prop_map(|c| {
        if let Err(e) = validate(&c) {
            panic!("generated an invalid config ({e}): {c:#?}");
        }
        c
    })
}

fn json(c: &Config) -> Value {
    serde_json::to_value(c).unwrap()
}

fn list<'a>(v: &'a Value, pointer: &str) -> &'a [Value] {
    v.pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[][..], Vec::as_slice)
}

fn key<'a>(entry: &'a Value, field: &str) -> &'a Value {
    &entry[field]
}

/// The oracle for one entry present in the child (and maybe the parent): Ignition's rules
/// stated entry by entry.
fn check_entry(parent: Option<&Map<String, Value>>, child: &Map<String, Value>, merged: &Value) {
    let empty = Map::new();
    let parent = parent.unwrap_or(&empty);
    let Value::Object(merged) = merged else {
        panic!("merged entry is not an object: {merged}");
    };
    for k in merged.keys() {
        assert!(
            parent.contains_key(k) || child.contains_key(k),
            "{k} came from neither side"
        );
    }
    for (k, pv) in parent {
        if !child.contains_key(k) {
            assert_eq!(
                &merged[k], pv,
                "{k}: unset in the child, the parent's is kept"
            );
        }
    }
    for (k, cv) in child {
        let m = &merged[k];
        match (parent.get(k), cv) {
            (Some(Value::Object(pv)), Value::Object(cv)) => check_entry(Some(pv), cv, m),
            (Some(Value::Array(pv)), Value::Array(cv)) => match k.as_str() {
                "append" => {
                    let want: Vec<Value> = pv.iter().chain(cv).cloned().collect();
                    assert_eq!(m, &Value::Array(want), "append concatenates");
                }
                "dropins" => check_keyed(pv, cv, m, "name"),
                _ => {
                    let mut want = pv.clone();
                    for x in cv {
                        if !want.contains(x) {
                            want.push(x.clone());
                        }
                    }
                    assert_eq!(m, &Value::Array(want), "{k}: a union, parent's first");
                }
            },
            _ => assert_eq!(m, cv, "{k}: set in the child, the child's wins"),
        }
    }
}

/// A keyed list: parent entries in their order (merged with the child's of the same key),
/// then the child's new entries in theirs.
fn check_keyed(parent: &[Value], child: &[Value], merged: &Value, field: &str) {
    let merged = merged.as_array().map_or(&[][..], Vec::as_slice);
    let parent_keys: Vec<&Value> = parent.iter().map(|e| key(e, field)).collect();
    let mut want_keys = parent_keys.clone();
    want_keys.extend(
        child
            .iter()
            .map(|e| key(e, field))
            .filter(|k| !parent_keys.contains(k)),
    );
    let got_keys: Vec<&Value> = merged.iter().map(|e| key(e, field)).collect();
    assert_eq!(
        got_keys, want_keys,
        "order: parent's, then new child entries"
    );
    for m in merged {
        let k = key(m, field);
        let p = parent.iter().find(|e| key(e, field) == k);
        match child.iter().find(|e| key(e, field) == k) {
            Some(Value::Object(c)) => check_entry(p.and_then(Value::as_object), c, m),
            Some(other) => panic!("entry is not an object: {other}"),
            None => assert_eq!(Some(m), p, "an entry only the parent has is kept as is"),
        }
    }
}

fn cases(n: u32) -> ProptestConfig {
    ProptestConfig {
        cases: n,
        ..ProptestConfig::default()
    }
}

proptest! {
    #![proptest_config(cases(128))]

    /// Merging two valid configs never panics and gives a valid config.
    #[test]
    fn valid_configs_merge_into_a_valid_config(
        (a, b) in any::<bool>().prop_flat_map(|fixed| (valid(fixed), valid(fixed))),
    ) {
        let m = merge(&a, &b);
        prop_assert_eq!(validate(&m).err(), None::<ValidationError>);
    }

    /// An empty config — with no version, or with the same version — changes nothing, as a
    /// parent or as a child.
    #[test]
    fn the_empty_config_is_an_identity(a in valid(false)) {
        let mut versioned = Config::default();
        versioned.ignition.version = Some(VERSION.to_string());
        for empty in [Config::default(), versioned] {
            prop_assert_eq!(&merge(&empty, &a), &a);
            prop_assert_eq!(&merge(&a, &empty), &a);
        }
    }

    /// (a ⊕ b) ⊕ c = a ⊕ (b ⊕ c) while every path keeps its kind.
    #[test]
    fn merge_is_associative(a in valid(true), b in valid(true), c in valid(true)) {
        prop_assert_eq!(merge(&merge(&a, &b), &c), merge(&a, &merge(&b, &c)));
    }

    /// Entry by entry, the child wins: the oracle of Ignition's rules over every keyed list.
    #[test]
    fn the_child_wins_entry_by_entry(a in valid(true), b in valid(true)) {
        let merged = merge(&a, &b);
        let (p, c, m) = (json(&a), json(&b), json(&merged));
        for (pointer, field) in [
            ("/storage/files", "path"),
            ("/storage/directories", "path"),
            ("/storage/links", "path"),
            ("/systemd/units", "name"),
            ("/passwd/users", "name"),
            ("/passwd/groups", "name"),
        ] {
            let entries = m.pointer(pointer).cloned().unwrap_or(Value::Array(vec![]));
            check_keyed(list(&p, pointer), list(&c, pointer), &entries, field);
        }
        prop_assert_eq!(&m["ignition"], &c["ignition"]);
        let (pa, ca, ma) = (&a.kernel_arguments, &b.kernel_arguments, &merged.kernel_arguments);
        for (parent, child, merged) in [
            (&pa.should_exist, &ca.should_exist, &ma.should_exist),
            (&pa.should_not_exist, &ca.should_not_exist, &ma.should_not_exist),
        ] {
            let mut want = parent.clone();
            for x in child {
                if !want.contains(x) {
                    want.push(x.clone());
                }
            }
            prop_assert_eq!(merged, &want, "kernel arguments: a union, parent's first");
        }
    }

    /// Files, directories and links share one key space: each path of the child is in the
    /// child's list only; a path only the parent has keeps its list.
    #[test]
    fn a_path_takes_the_childs_kind(a in valid(false), b in valid(false)) {
        let m = merge(&a, &b);
        let kinds = |c: &Config| -> BTreeMap<String, Vec<&'static str>> {
            let mut out: BTreeMap<String, Vec<&'static str>> = BTreeMap::new();
            for f in &c.storage.files {
                out.entry(f.path.clone()).or_default().push("file");
            }
            for d in &c.storage.directories {
                out.entry(d.path.clone()).or_default().push("directory");
            }
            for l in &c.storage.links {
                out.entry(l.path.clone()).or_default().push("link");
            }
            out
        };
        let (pk, ck, mk) = (kinds(&a), kinds(&b), kinds(&m));
        let mut want = pk;
        want.extend(ck);
        prop_assert_eq!(mk, want);
        prop_assert_eq!(validate(&m).err(), None::<ValidationError>);
    }
}

fn parse(json: &str) -> Config {
    machineos_ignition::parse(json.as_bytes()).unwrap().config
}

#[test]
fn owners_by_id_and_by_name_merge_into_an_invalid_config() {
    let a = parse(
        r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/a","user":{"name":"core"}}]}}"#,
    );
    let b = parse(
        r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/a","user":{"id":0}}]}}"#,
    );
    assert_eq!(validate(&a), Ok(vec![]));
    assert_eq!(validate(&b), Ok(vec![]));
    let m = merge(&a, &b);
    assert_eq!(m.storage.files[0].user.id, Some(0));
    assert_eq!(m.storage.files[0].user.name.as_deref(), Some("core"));
    assert_eq!(
        validate(&m),
        Err(ValidationError {
            path: "$.storage.files.0.user".into(),
            message: "cannot set both id and name".into()
        })
    );
}

#[test]
fn associativity_needs_paths_to_keep_their_kind() {
    // /x: a file with a mode, then a directory, then a file again.
    let a =
        parse(r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/x","mode":384}]}}"#);
    let b = parse(r#"{"ignition":{"version":"3.5.0"},"storage":{"directories":[{"path":"/x"}]}}"#);
    let c = parse(r#"{"ignition":{"version":"3.5.0"},"storage":{"files":[{"path":"/x"}]}}"#);
    let left = merge(&merge(&a, &b), &c);
    let right = merge(&a, &merge(&b, &c));
    // Left, the directory displaced a's file before c's came; right, c's file merged over a's.
    assert_eq!(left.storage.files[0].mode, None);
    assert_eq!(right.storage.files[0].mode, Some(384));
    assert!(left.storage.directories.is_empty() && right.storage.directories.is_empty());
}
