//! What ostree does not carry from an image to a node, made up for in the layer when the
//! base is ostree-encapsulated (it has an object store under `/sysroot/ostree/repo`).
//!
//! A node keeps `/var` across deployments: ostree populates it from an image only on a
//! stateroot's first deployment, and ostree-ext before libostree 2024.3 moves a derived
//! layer's `/var` to `/usr/share/factory/var` on import. So content the config puts under
//! `/var` (including through the `/usr/local`, `/opt`, `/root`, `/home`, `/srv`, `/mnt`
//! symlinks into it) would never reach a node that rebases onto the image. [`deliver_var`]
//! keeps a copy of each such node under `/usr/share/factory/var/…` and writes a
//! systemd-tmpfiles snippet, [`VAR_TMPFILES`], that recreates it at every boot without
//! touching what the node already has: `d` for directories (created, or their mode and
//! owner set), `C` for files (copied from the factory copy only where missing), `L` for
//! symlinks (created only where missing).

use std::fmt::Write as _;

use super::error::{At, PlanError};
use crate::contents::Contents;
use crate::overlay::{Change, Kind, LayerKind, LayerNode, OSTREE_OBJECTS, Overlay, Stat, parent};

/// The snippet that recreates the config's `/var` content at boot.
pub const VAR_TMPFILES: &str = "/usr/lib/tmpfiles.d/machineos-var.conf";
/// Where the factory copies of `/var` live (systemd's convention for `C` lines).
pub const FACTORY: &str = "/usr/share/factory";

/// Whether the base is ostree-encapsulated: it has the object store (a directory).
pub(super) fn is_encapsulated(fs: &Overlay<'_>) -> bool {
    matches!(
        fs.lstat(OSTREE_OBJECTS.trim_end_matches('/')),
        Ok(Some(Stat {
            kind: Kind::Dir,
            ..
        }))
    )
}

/// Copy every node the layer has under `/var` (except below `skip`, image directories
/// without their leading `/` whose contents the build drops) to the factory, and write
/// [`VAR_TMPFILES`]. Returns the number of `/var` nodes delivered (0 writes nothing).
pub(super) fn deliver_var(fs: &mut Overlay<'_>, skip: &[&str]) -> Result<usize, PlanError> {
    let dropped = |p: &str| {
        let rel = p.trim_start_matches('/');
        skip.iter()
            .any(|s| rel.strip_prefix(s).is_some_and(|r| r.starts_with('/')))
    };
    let var: Vec<(String, LayerNode)> = fs
        .changes()
        .iter()
        .filter_map(|(p, c)| match c {
            Change::Node(n) if p.starts_with("/var/") && !dropped(p) => {
                Some((p.clone(), n.clone()))
            }
            _ => None,
        })
        .collect();
    if var.is_empty() {
        return Ok(0);
    }
    let jp = "$";
    let mut conf = String::from(
        "# Written by machineos: the image's /var content, recreated at boot on nodes that\n\
         # did not get it with their first deployment. Never overwrites what a node has.\n",
    );
    for (p, n) in &var {
        let copy = format!("{FACTORY}{p}");
        let path = quote(p);
        fs.mkdir_all(parent(&copy))
            .at(jp, &format!("creating the factory copy of {p}"))?;
        match &n.kind {
            LayerKind::Dir { .. } => {
                fs.mkdir_all(&copy)
                    .at(jp, &format!("creating the factory copy of {p}"))?;
                fs.set_meta(&copy, Some(n.mode), n.uid, n.gid)
                    .at(jp, &format!("creating the factory copy of {p}"))?;
                let _ = writeln!(conf, "d {path} {:04o} {} {} -", n.mode, n.uid, n.gid);
            }
            LayerKind::File(_) | LayerKind::HardLink(_) => {
                let data = fs
                    .contents(p)
                    .at(jp, &format!("reading {p}"))?
                    .unwrap_or_else(|| Contents::bytes(Vec::new()));
                fs.put(&copy, LayerKind::File(data), n.mode, n.uid, n.gid)
                    .at(jp, &format!("writing the factory copy of {p}"))?;
                let _ = writeln!(conf, "C {path} - - - - {}", quote(&copy));
            }
            LayerKind::Symlink(t) => {
                fs.put(&copy, LayerKind::Symlink(t.clone()), n.mode, n.uid, n.gid)
                    .at(jp, &format!("writing the factory copy of {p}"))?;
                let _ = writeln!(conf, "L {path} - - - - {}", quote(t));
            }
        }
    }
    fs.mkdir_all(parent(VAR_TMPFILES))
        .at(jp, &format!("creating the parents of {VAR_TMPFILES}"))?;
    fs.put(
        VAR_TMPFILES,
        LayerKind::File(Contents::bytes(conf.into_bytes())),
        0o644,
        0,
        0,
    )
    .at(jp, &format!("writing {VAR_TMPFILES}"))?;
    Ok(var.len())
}

/// A path or argument as a tmpfiles.d field: `%` doubled (specifiers), and inside double
/// quotes with `\xNN` escapes when it has whitespace, quotes, backslashes or control bytes.
fn quote(s: &str) -> String {
    let s = s.replace('%', "%%");
    let plain = s
        .bytes()
        .all(|b| b > b' ' && b != 0x7f && !matches!(b, b'"' | b'\'' | b'\\'));
    if plain {
        return s;
    }
    let mut out = String::from("\"");
    for c in s.chars() {
        if c.is_ascii() && (c <= ' ' || c == '\x7f' || matches!(c, '"' | '\'' | '\\')) {
            let _ = write!(out, "\\x{:02x}", c as u32);
        } else {
            out.push(c);
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::quote;

    #[test]
    fn tmpfiles_fields_are_quoted_only_when_needed() {
        assert_eq!(quote("/var/lib/app/conf"), "/var/lib/app/conf");
        assert_eq!(quote("/var/50%"), "/var/50%%");
        assert_eq!(quote("/var/a b"), "\"/var/a\\x20b\"");
        assert_eq!(quote("/var/naïve"), "/var/naïve");
        assert_eq!(quote("/var/q\"\\"), "\"/var/q\\x22\\x5c\"");
    }
}
