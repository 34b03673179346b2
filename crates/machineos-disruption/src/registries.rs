//! Whether a change of `/etc/containers/registries.conf` is safe without a drain — the MCO
//! daemon's `isSafeContainerRegistryConfChanges` (`pkg/daemon/drain.go`), which decides the
//! `Special` policy action: CRI-O is reloaded either way, but an unsafe change (one that can
//! make a running pod's image unpullable or pulled from elsewhere) drains the node first.
//!
//! Safe only when, between the old and the new file (containers-registries.conf(5) v2
//! TOML):
//! * `unqualified-search-registries` keeps its entries in order (new ones only appended);
//! * no `[[registry]]` is removed (a registry is keyed by its `prefix`, else `location`);
//! * of a registry in both: `prefix`, `location`, `blocked` and `insecure` are unchanged, no
//!   mirror (by `location`) is removed, an existing mirror's `pull-from-mirror` changes only
//!   to `digest-only`, and an added mirror is `digest-only` unless the registry has
//!   `mirror-by-digest-only = true`;
//! * a new registry's mirrors are all `digest-only`, or it has `mirror-by-digest-only = true`
//!   (which a new registry without mirrors needs too).
//!
//! A file that does not parse, or a missing side (added or removed file), is not safe.
//! Hand-written: a few field comparisons over `toml_edit`'s parse.

use std::collections::BTreeMap;

use toml_edit::{DocumentMut, Item, Table};

/// One `[[registry]]`, as far as the check reads it.
#[derive(Debug, Clone, PartialEq)]
struct Registry {
    prefix: String,
    location: String,
    blocked: bool,
    insecure: bool,
    mirror_by_digest_only: bool,
    /// Mirror location → `pull-from-mirror` (empty: the default, `all`).
    mirrors: Vec<(String, String)>,
}

fn text(t: &Table, key: &str) -> String {
    t.get(key)
        .and_then(Item::as_str)
        .unwrap_or_default()
        .to_owned()
}

fn flag(t: &Table, key: &str) -> bool {
    t.get(key).and_then(Item::as_bool).unwrap_or(false)
}

fn parse(bytes: &[u8]) -> Option<(Vec<String>, BTreeMap<String, Registry>)> {
    let doc: DocumentMut = std::str::from_utf8(bytes).ok()?.parse().ok()?;
    let search = doc
        .get("unqualified-search-registries")
        .and_then(Item::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let mut regs = BTreeMap::new();
    if let Some(tables) = doc.get("registry").and_then(Item::as_array_of_tables) {
        for t in tables {
            let mirrors = t
                .get("mirror")
                .and_then(Item::as_array_of_tables)
                .map(|ms| {
                    ms.iter()
                        .map(|m| (text(m, "location"), text(m, "pull-from-mirror")))
                        .collect()
                })
                .unwrap_or_default();
            let r = Registry {
                prefix: text(t, "prefix"),
                location: text(t, "location"),
                blocked: flag(t, "blocked"),
                insecure: flag(t, "insecure"),
                mirror_by_digest_only: flag(t, "mirror-by-digest-only"),
                mirrors,
            };
            let key = if r.prefix.is_empty() {
                r.location.clone()
            } else {
                r.prefix.clone()
            };
            regs.insert(key, r);
        }
    }
    Some((search, regs))
}

const DIGEST_ONLY: &str = "digest-only";

/// Whether changing registries.conf from `old` to `new` needs no drain (see the module
/// documentation).
pub fn is_safe_change(old: Option<&[u8]>, new: Option<&[u8]>) -> bool {
    let (Some(old), Some(new)) = (old, new) else {
        return false;
    };
    let (Some((old_search, old_regs)), Some((new_search, new_regs))) = (parse(old), parse(new))
    else {
        return false;
    };
    if !new_search.starts_with(&old_search) {
        return false;
    }
    for (key, o) in &old_regs {
        let Some(n) = new_regs.get(key) else {
            return false;
        };
        if (o.prefix != n.prefix)
            || (o.location != n.location)
            || (o.blocked != n.blocked)
            || (o.insecure != n.insecure)
        {
            return false;
        }
        for (loc, pull) in &o.mirrors {
            match n.mirrors.iter().find(|(l, _)| l == loc) {
                None => return false,
                Some((_, now)) if now != pull && now != DIGEST_ONLY => return false,
                Some(_) => {}
            }
        }
        for (loc, pull) in &n.mirrors {
            let added = !o.mirrors.iter().any(|(l, _)| l == loc);
            if added && pull != DIGEST_ONLY && !n.mirror_by_digest_only {
                return false;
            }
        }
    }
    for (key, n) in &new_regs {
        if old_regs.contains_key(key) {
            continue;
        }
        let all_digest_only =
            !n.mirrors.is_empty() && n.mirrors.iter().all(|(_, p)| p == DIGEST_ONLY);
        if !all_digest_only && !n.mirror_by_digest_only {
            return false;
        }
    }
    true
}
