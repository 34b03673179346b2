//! Go's `path.Clean` and `path.Join`, byte for byte: ign-converter and Ignition's spec 3
//! validation compare and build node paths with them.

/// Go's `path.Clean`.
pub(crate) fn clean(path: &str) -> String {
    let p = path.as_bytes();
    if p.is_empty() {
        return ".".into();
    }
    let rooted = p[0] == b'/';
    let n = p.len();
    // Go's lazybuf: `buf[..w]` is the output; bytes past `w` may be stale.
    let mut buf: Vec<u8> = Vec::with_capacity(n);
    let mut w = 0usize;
    let put = |buf: &mut Vec<u8>, w: &mut usize, c: u8| {
        if *w < buf.len() {
            buf[*w] = c;
        } else {
            buf.push(c);
        }
        *w += 1;
    };
    let (mut r, mut dotdot) = (0, 0);
    if rooted {
        put(&mut buf, &mut w, b'/');
        r = 1;
        dotdot = 1;
    }
    while r < n {
        // An empty element, or `.`.
        if p[r] == b'/' || (p[r] == b'.' && (r + 1 == n || p[r + 1] == b'/')) {
            r += 1;
        } else if p[r] == b'.' && p[r + 1] == b'.' && (r + 2 == n || p[r + 2] == b'/') {
            r += 2;
            if w > dotdot {
                w -= 1;
                while w > dotdot && buf.get(w) != Some(&b'/') {
                    w -= 1;
                }
            } else if !rooted {
                if w > 0 {
                    put(&mut buf, &mut w, b'/');
                }
                put(&mut buf, &mut w, b'.');
                put(&mut buf, &mut w, b'.');
                dotdot = w;
            }
        } else {
            if (rooted && w != 1) || (!rooted && w != 0) {
                put(&mut buf, &mut w, b'/');
            }
            while r < n && p[r] != b'/' {
                put(&mut buf, &mut w, p[r]);
                r += 1;
            }
        }
    }
    if w == 0 {
        return ".".into();
    }
    String::from_utf8_lossy(&buf[..w]).into_owned()
}

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
