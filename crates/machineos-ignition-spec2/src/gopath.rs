//! Go's `path.Clean` and `path.Join`: ign-converter and Ignition's spec 3 validation
//! compare and build node paths with them. `Clean` is machineos-ignition's.

/// Go's `path.Clean`: machineos-ignition's, which its spec 3 validation uses too.
pub(crate) use machineos_ignition::validate::clean;

/// Go's `path.Join`.
pub(crate) fn join(elems: &[&str]) -> String {
    match elems.iter().position(|e| !e.is_empty()) {
        Some(i) => clean(&elems[i..].join("/")),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_and_join_match_go() {
        let cases = [
            ("", "."),
            ("/", "/"),
            ("a/b/../c", "a/c"),
            ("/a/../../b", "/b"),
            ("../a", "../a"),
            ("a/../..", ".."),
            ("//a//b/./c/", "/a/b/c"),
            ("/..", "/"),
            ("a/..", "."),
            ("/a/b/..", "/a"),
            ("abc/def/../../..", ".."),
        ];
        for (input, want) in cases {
            assert_eq!(clean(input), want, "{input:?}");
        }
        assert_eq!(join(&["/", "", "a//b"]), "/a/b");
        assert_eq!(join(&["", "/x/../y"]), "/y");
        assert_eq!(join(&["", ""]), "");
    }
}
