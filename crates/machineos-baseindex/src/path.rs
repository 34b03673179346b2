//! Paths as the index keeps them — absolute, clean, compared component by component — so
//! tar member names in any spelling (`./usr/x`, `usr/x/`, `/usr/x`) land on one key.

use std::cmp::Ordering;

/// Why a member name could not be made an index path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PathIssue {
    /// A `..` component climbs above the image root.
    Escapes,
}

/// The clean absolute form of a tar member name: `.` and empty components dropped, `..`
/// resolved lexically (climbing above the root is an error), no trailing `/`. The root is
/// `/`. Bytes that are not UTF-8 are replaced (the planner can only name UTF-8 paths).
pub(crate) fn normalize(name: &[u8]) -> Result<String, PathIssue> {
    let name = String::from_utf8_lossy(name);
    let mut parts: Vec<&str> = Vec::new();
    for c in name.split('/') {
        match c {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() {
                    return Err(PathIssue::Escapes);
                }
            }
            c => parts.push(c),
        }
    }
    let mut out = String::with_capacity(name.len() + 1);
    for c in &parts {
        out.push('/');
        out.push_str(c);
    }
    if out.is_empty() {
        out.push('/');
    }
    Ok(out)
}

/// Whether `p` is already in the form [`normalize`] produces.
pub(crate) fn is_clean(p: &str) -> bool {
    if p == "/" {
        return true;
    }
    let b = p.as_bytes();
    if b.first() != Some(&b'/') {
        return false;
    }
    // Every component (the bytes after each `/`) is non-empty and not `.` or `..`.
    b.split(|&c| c == b'/')
        .skip(1)
        .all(|c| !c.is_empty() && c != b"." && c != b"..")
}

/// Order of clean paths component by component — the order of `std::path::Path`: a
/// directory sorts immediately before its contents, names within a directory bytewise.
/// For clean paths that is bytewise order with `/` taken as the smallest byte.
pub(crate) fn cmp(a: &str, b: &str) -> Ordering {
    let (a, b) = (a.as_bytes(), b.as_bytes());
    let same = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    match (a.get(same), b.get(same)) {
        (Some(&x), Some(&y)) => (x != b'/', x).cmp(&(y != b'/', y)),
        _ => a.len().cmp(&b.len()),
    }
}

/// The parent and the join of clean paths are the planner's (one definition in machineos).
pub(crate) use machineos_layer::path::{join, parent};

/// The last component of a clean path (empty for the root).
pub(crate) fn file_name(p: &str) -> &str {
    match p.rfind('/') {
        Some(i) => &p[i + 1..],
        None => p,
    }
}

/// The prefix every strict descendant of `dir` starts with.
pub(crate) fn descendant_prefix(dir: &str) -> String {
    if dir == "/" {
        "/".to_string()
    } else {
        format!("{dir}/")
    }
}

/// Whether `a` is `p` itself or one of its ancestors.
pub(crate) fn is_ancestor_or_self(a: &str, p: &str) -> bool {
    a == "/" || p == a || (p.starts_with(a) && p.as_bytes().get(a.len()) == Some(&b'/'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn normalizes_member_names() {
        for (name, want) in [
            ("./usr/x", Ok("/usr/x")),
            ("usr/x/", Ok("/usr/x")),
            ("/usr/x", Ok("/usr/x")),
            ("usr//./x", Ok("/usr/x")),
            ("usr/lib/../x", Ok("/usr/x")),
            ("./", Ok("/")),
            ("", Ok("/")),
            ("../etc", Err(PathIssue::Escapes)),
            ("usr/../../etc", Err(PathIssue::Escapes)),
        ] {
            assert_eq!(
                normalize(name.as_bytes()).as_deref().map_err(|e| *e),
                want,
                "{name}"
            );
        }
    }

    #[test]
    fn orders_component_wise() {
        let mut v = vec![
            "/usr-a", "/usr/x", "/usr", "/", "/a.b", "/a/b", "/a", "/a/b!",
        ];
        v.sort_by(|a, b| cmp(a, b));
        assert_eq!(
            v,
            [
                "/", "/a", "/a/b", "/a/b!", "/a.b", "/usr", "/usr/x", "/usr-a"
            ]
        );
        // The same order as std's component-wise `Path` ordering.
        let mut w = v.clone();
        w.sort_by(|a, b| std::path::Path::new(a).cmp(std::path::Path::new(b)));
        assert_eq!(v, w);
    }

    #[test]
    fn pieces() {
        assert_eq!(parent("/a/b"), "/a");
        assert_eq!(parent("/a"), "/");
        assert_eq!(parent("/"), "/");
        assert_eq!(file_name("/a/b"), "b");
        assert_eq!(join("/", "a"), "/a");
        assert!(is_ancestor_or_self("/a", "/a/b"));
        assert!(!is_ancestor_or_self("/a", "/ab"));
        assert!(is_clean("/a/b") && is_clean("/") && !is_clean("/a/") && !is_clean("a"));
    }
}
