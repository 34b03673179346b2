//! User and group names → ids from the image's own databases, as glibc with RHCOS's
//! `passwd: files altfiles` would find them: `/etc/passwd` first, then `/usr/lib/passwd`.

/// Find `name` in passwd/group-format `databases` (searched in order); the id is the
/// third field. Malformed lines are skipped, as glibc does.
pub fn lookup_id(databases: &[&[u8]], name: &str) -> Option<u32> {
    databases.iter().find_map(|db| {
        String::from_utf8_lossy(db).lines().find_map(|line| {
            let mut fields = line.split(':');
            let n = fields.next()?;
            if n != name || n.starts_with('+') || n.starts_with('-') {
                return None;
            }
            fields.nth(1)?.trim().parse().ok()
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let etc = b"root:x:0:0:root:/root:/bin/bash\ncore:x:1000:1000::/var/home/core:/bin/bash\nbad line\n";
        let lib = b"altuser:x:990:990::/:/sbin/nologin\ncore:x:5:5::/:/bin/sh\n";
        let dbs: [&[u8]; 2] = [etc, lib];
        for (name, want) in [
            ("root", Some(0)),
            ("core", Some(1000)),
            ("altuser", Some(990)),
            ("nobody", None),
            ("bad line", None),
        ] {
            assert_eq!(lookup_id(&dbs, name), want, "{name}");
        }
    }
}
