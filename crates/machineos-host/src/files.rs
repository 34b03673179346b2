//! Files the agent writes on the host, and the host facts it reads from files. Every path
//! is under a root directory (`/` on a node, a temporary directory in tests).
//!
//! Contract:
//! * [`write_atomic`] writes a temporary file next to the target, fsyncs it, sets its mode,
//!   renames it over the target and fsyncs the directory: a reader sees the old content or
//!   the new, never a torn file. Missing parent directories are created (mode 0755).
//! * The pull secret goes where the host tool reads credentials: [`BOOTC_AUTH`] for bootc,
//!   [`RPM_OSTREE_AUTH`] for rpm-ostree (the MCO's choice, `pkg/daemon`'s
//!   `useMergedPullSecrets`), mode 0600 — merged into what is there, registry by registry
//!   ([`merge_auth`]): `/etc/ostree/auth.json` is the node's own, and a Secret naming one
//!   registry must not drop the credentials of the others. What a merge replaced is kept
//!   beside the file and put back by the next merge, or by [`release_auth`] once the update
//!   that needed the Secret is done, so a node's own entry for a registry returns and the
//!   Secret's registries go.
//! * SSH keys go to `<root>/home/<user>/.ssh/authorized_keys.d/`[`SSH_KEY_FRAGMENT`] (mode
//!   0600; `.ssh` and `authorized_keys.d` 0700). The fragment is `ignition`, the one Ignition
//!   wrote at first boot and the MCO daemon rewrites (MCO `pkg/daemon/constants`
//!   `RHCOSDefaultSSHKeyPath`, `update.go` `atomicallyWriteSSHKey`): writing a second
//!   fragment would leave keys removed from the MachineConfig authorized through the first.
//!   Ownership is given to the user only when the agent runs as root and the user is in
//!   `<root>/etc/passwd` (or `<root>/usr/lib/passwd`); otherwise it is left alone (tests,
//!   unprivileged runs).
//! * Errors name the file.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use crate::HostError;

/// Where bootc reads pull credentials, relative to the root.
pub const BOOTC_AUTH: &str = "etc/ostree/auth.json";
/// Where rpm-ostree reads pull credentials, relative to the root.
pub const RPM_OSTREE_AUTH: &str = "run/ostree/auth.json";
/// The `authorized_keys.d` fragment the keys are written to.
pub const SSH_KEY_FRAGMENT: &str = "ignition";

fn io(path: &Path) -> impl FnOnce(std::io::Error) -> HostError + '_ {
    move |source| HostError::Io {
        path: path.display().to_string(),
        source,
    }
}

/// Write `data` to `path` atomically with permissions `mode`.
pub fn write_atomic(path: &Path, data: &[u8], mode: u32) -> Result<(), HostError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let tmp = dir.join(format!(".{name}.tmp-{}", std::process::id()));
    let result = (|| {
        let mut f = std::fs::File::create(&tmp).map_err(io(&tmp))?;
        f.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(io(&tmp))?;
        f.write_all(data).map_err(io(&tmp))?;
        f.sync_all().map_err(io(&tmp))?;
        std::fs::rename(&tmp, path).map_err(io(path))
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result?;
    if let Ok(d) = std::fs::File::open(dir) {
        // Best effort: the rename is durable once the directory is synced.
        let _ = d.sync_all();
    }
    Ok(())
}

fn invalid(path: &str, message: String) -> HostError {
    HostError::Io {
        path: path.to_owned(),
        source: std::io::Error::new(std::io::ErrorKind::InvalidData, message),
    }
}

/// A JSON file read as an object (absent or blank: `{}`).
fn read_json_object(path: &Path) -> Result<serde_json::Map<String, serde_json::Value>, HostError> {
    let v: serde_json::Value = match std::fs::read(path) {
        Ok(bytes) if !bytes.iter().all(u8::is_ascii_whitespace) => {
            serde_json::from_slice(&bytes)
                .map_err(|e| invalid(&path.display().to_string(), format!("not JSON: {e}")))?
        }
        Ok(_) => serde_json::json!({}),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => serde_json::json!({}),
        Err(e) => return Err(io(path)(e)),
    };
    match v {
        serde_json::Value::Object(m) => Ok(m),
        _ => Err(invalid(
            &path.display().to_string(),
            "not a JSON object".to_owned(),
        )),
    }
}

/// Where the entries an auth file had before the last merge are kept: beside it
/// (`<file>.machineos-replaced`), so the record lives as long as the file — across reboots
/// for `/etc/ostree/auth.json`, in `/run` with `/run/ostree/auth.json`.
pub fn replaced_record(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".machineos-replaced");
    path.with_file_name(name)
}

/// The auth file at `path` (its bytes; absent: empty) with `data`'s registries merged in,
/// and the record of what the merge replaced ([`replaced_record`]'s content). First the
/// previous merge is undone — every registry it set gets back the entry it had before it
/// (or goes, if it had none) — so the node's own credentials for a registry come back once
/// no Secret names it; then each registry `data`'s `auths` names gets `data`'s entry, its
/// current one recorded. Every other registry and member of the file stays as it is.
/// `what` names `data` in errors.
pub fn merge_auth(path: &Path, data: &[u8], what: &str) -> Result<(Vec<u8>, Vec<u8>), HostError> {
    let given: serde_json::Value =
        serde_json::from_slice(data).map_err(|e| invalid(what, format!("not JSON: {e}")))?;
    let Some(given) = given.get("auths").and_then(serde_json::Value::as_object) else {
        return Err(invalid(what, "no `auths` object".to_owned()));
    };
    let mut file = read_json_object(path)?;
    let previous = read_json_object(&replaced_record(path))?;
    let auths = file.entry("auths").or_insert_with(|| serde_json::json!({}));
    let Some(auths) = auths.as_object_mut() else {
        return Err(invalid(
            &path.display().to_string(),
            "`auths` is not an object".to_owned(),
        ));
    };
    for (registry, before) in previous {
        match before {
            serde_json::Value::Null => {
                auths.remove(&registry);
            }
            entry => {
                auths.insert(registry, entry);
            }
        }
    }
    let mut replaced = serde_json::Map::new();
    for (registry, entry) in given {
        let before = auths.insert(registry.clone(), entry.clone());
        replaced.insert(registry.clone(), before.unwrap_or(serde_json::Value::Null));
    }
    let file = serde_json::to_vec(&file).map_err(|e| invalid(what, e.to_string()))?;
    let replaced = serde_json::to_vec(&replaced).map_err(|e| invalid(what, e.to_string()))?;
    Ok((file, replaced))
}

/// [`merge_auth`] `data` into `path` and keep the record; the file first (a crash between
/// the two leaves the older record, which undoes no more than it should).
fn merge_into(path: &Path, data: &[u8], what: &str) -> Result<(), HostError> {
    let (merged, replaced) = merge_auth(path, data, what)?;
    write_atomic(path, &merged, 0o600)?;
    write_atomic(&replaced_record(path), &replaced, 0o600)
}

/// Undo the last merge into the auth file at `<root>/<rel>` (every registry it set gets back
/// the entry it had before, or goes) and drop its record; nothing when there is none.
pub fn release_auth(root: &Path, rel: &str) -> Result<(), HostError> {
    let path = root.join(rel);
    let record = replaced_record(&path);
    if !record.exists() {
        return Ok(());
    }
    let (restored, _) = merge_auth(&path, br#"{"auths":{}}"#, "the release")?;
    write_atomic(&path, &restored, 0o600)?;
    std::fs::remove_file(&record).map_err(io(&record))
}

/// Merge the pull secret `data` (a `.dockerconfigjson`) into the auth file at `<root>/<rel>`
/// ([`merge_auth`]; mode 0600); returns the full path.
pub fn write_pull_secret(root: &Path, rel: &str, data: &[u8]) -> Result<PathBuf, HostError> {
    let path = root.join(rel);
    merge_into(&path, data, "the pull secret")?;
    Ok(path)
}

/// Merge the credentials at `auth` into the file the tool reads them from (`<root>/<rel>`,
/// [`merge_auth`]), unless `auth` is that file already.
pub fn install_auth(root: &Path, rel: &str, auth: Option<&Path>) -> Result<(), HostError> {
    let Some(auth) = auth else { return Ok(()) };
    let target = root.join(rel);
    if auth == target {
        return Ok(());
    }
    let data = std::fs::read(auth).map_err(io(auth))?;
    merge_into(&target, &data, &auth.display().to_string())
}

/// A user's uid, gid and home from a passwd file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PasswdEntry {
    /// The uid.
    pub uid: u32,
    /// The primary gid.
    pub gid: u32,
}

/// Look `user` up in `<root>/etc/passwd`, then `<root>/usr/lib/passwd`.
pub fn lookup_user(root: &Path, user: &str) -> Option<PasswdEntry> {
    ["etc/passwd", "usr/lib/passwd"].iter().find_map(|rel| {
        let text = std::fs::read_to_string(root.join(rel)).ok()?;
        text.lines().find_map(|line| {
            let f: Vec<&str> = line.split(':').collect();
            if f.len() >= 4 && f[0] == user {
                Some(PasswdEntry {
                    uid: f[2].parse().ok()?,
                    gid: f[3].parse().ok()?,
                })
            } else {
                None
            }
        })
    })
}

/// The file `user`'s keys go to.
pub fn ssh_key_path(root: &Path, user: &str) -> PathBuf {
    root.join("home")
        .join(user)
        .join(".ssh/authorized_keys.d")
        .join(SSH_KEY_FRAGMENT)
}

/// Write `keys` (one a line) as `user`'s authorized keys; returns the file's path.
pub fn write_ssh_keys(root: &Path, user: &str, keys: &[String]) -> Result<PathBuf, HostError> {
    let path = ssh_key_path(root, user);
    if user.is_empty() || user.contains('/') || user == "." || user == ".." {
        return Err(HostError::Io {
            path: path.display().to_string(),
            source: std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("invalid user name {user:?}"),
            ),
        });
    }
    let ssh = root.join("home").join(user).join(".ssh");
    let keys_d = ssh.join("authorized_keys.d");
    for dir in [&ssh, &keys_d] {
        std::fs::create_dir_all(dir).map_err(io(dir))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700)).map_err(io(dir))?;
    }
    let mut text = keys.join("\n");
    if !text.is_empty() {
        text.push('\n');
    }
    write_atomic(&path, text.as_bytes(), 0o600)?;
    let owner = lookup_user(root, user);
    if rustix::process::geteuid().is_root()
        && let Some(PasswdEntry { uid, gid }) = owner
    {
        for p in [&ssh, &keys_d, &path] {
            std::os::unix::fs::chown(p, Some(uid), Some(gid)).map_err(io(p))?;
        }
    } else {
        tracing::debug!(
            user,
            "not root or unknown user: SSH key ownership left as is"
        );
    }
    Ok(path)
}

/// The boot guard's rollback record (`<root>/var/lib/machineos/boot-guard/rolled-back`),
/// if the guard left one.
pub fn boot_guard_record(root: &Path) -> Result<Option<String>, HostError> {
    let path = root.join(machineos_boot_guard::RECORD_PATH.trim_start_matches('/'));
    match std::fs::read_to_string(&path) {
        Ok(text) => Ok(Some(text)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(io(&path)(e)),
    }
}

/// Remove the boot guard's rollback record (re-arming the guard); absent is fine.
pub fn clear_boot_guard_record(root: &Path) -> Result<(), HostError> {
    let path = root.join(machineos_boot_guard::RECORD_PATH.trim_start_matches('/'));
    match std::fs::remove_file(&path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => Err(io(&path)(e)),
        _ => Ok(()),
    }
}

/// This boot's id, `<root>/proc/sys/kernel/random/boot_id`, trimmed.
pub fn boot_id(root: &Path) -> Result<String, HostError> {
    let path = root.join("proc/sys/kernel/random/boot_id");
    Ok(std::fs::read_to_string(&path)
        .map_err(io(&path))?
        .trim()
        .to_owned())
}

/// The booted kernel arguments, `<root>/proc/cmdline`, without the ones the boot loader
/// adds (`BOOT_IMAGE=`, `initrd=`). Quoted arguments (`a="b c"`) stay one argument.
pub fn booted_kargs(root: &Path) -> Result<Vec<String>, HostError> {
    let path = root.join("proc/cmdline");
    let text = std::fs::read_to_string(&path).map_err(io(&path))?;
    Ok(split_kargs(&text)
        .into_iter()
        .filter(|k| !k.starts_with("BOOT_IMAGE=") && !k.starts_with("initrd="))
        .collect())
}

/// Split a kernel command line on spaces outside double quotes.
pub fn split_kargs(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut quoted = false;
    for c in line.trim().chars() {
        match c {
            '"' => {
                quoted = !quoted;
                cur.push(c);
            }
            c if c.is_whitespace() && !quoted => {
                if !cur.is_empty() {
                    out.push(std::mem::take(&mut cur));
                }
            }
            c => cur.push(c),
        }
    }
    if !cur.is_empty() {
        out.push(cur);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_boot_guards_record_is_read_below_the_host_root_and_cleared_once() {
        let root = tempfile::tempdir().unwrap();
        assert_eq!(boot_guard_record(root.path()).unwrap(), None);
        clear_boot_guard_record(root.path()).expect("absent is fine");
        // Where the script writes it on the host, as the agent's container mounts the host.
        let path = root.path().join("var/lib/machineos/boot-guard/rolled-back");
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(
            &path,
            "from=a.0\ntool=bootc\ncheck=kubelet-healthz\nevidence=e\n",
        )
        .unwrap();
        let text = boot_guard_record(root.path()).unwrap().expect("the record");
        assert_eq!(
            machineos_boot_guard::Record::parse(&text).unwrap().tool,
            "bootc"
        );
        clear_boot_guard_record(root.path()).unwrap();
        assert!(!path.exists());
        assert_eq!(boot_guard_record(root.path()).unwrap(), None);
    }

    #[test]
    fn kargs_split_on_unquoted_spaces() {
        assert_eq!(
            split_kargs("BOOT_IMAGE=(hd0)/vmlinuz a=1  b=\"x y\" c\n"),
            ["BOOT_IMAGE=(hd0)/vmlinuz", "a=1", "b=\"x y\"", "c"]
        );
    }
}
