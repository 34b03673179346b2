//! Unit-file syntax as Ignition checks it (go-systemd's deserializer), and the sections a
//! unit declares — needed to validate contents and to decide `[Install]` questions.

/// One `Name=Value` option of a unit file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnitOption {
    /// The section it is in, such as `Install`.
    pub section: String,
    /// The option name.
    pub name: String,
    /// The value, continuation lines joined.
    pub value: String,
}

/// systemd's line limit, which go-systemd enforces.
const LINE_MAX: usize = 2048;

/// Parse unit contents into options; errors read as Ignition's (`invalid unit content: …`).
pub fn parse_unit(contents: &str) -> Result<Vec<UnitOption>, String> {
    parse_inner(contents).map_err(|e| format!("invalid unit content: {e}"))
}

fn parse_inner(contents: &str) -> Result<Vec<UnitOption>, String> {
    let b = contents.as_bytes();
    // Any run of LINE_MAX bytes without a newline is rejected up front.
    let mut run = 0;
    for &c in b {
        if c == b'\n' || c == b'\r' {
            run = 0;
        } else {
            run += 1;
            if run >= LINE_MAX {
                return Err(format!("line too long (max {LINE_MAX} bytes)"));
            }
        }
    }
    let mut opts = Vec::new();
    let mut i = 0;
    let mut section: Option<String> = None;
    let to_eol = |i: &mut usize| -> (String, bool) {
        let start = *i;
        while *i < b.len() && b[*i] != b'\n' {
            *i += 1;
        }
        let eof = *i >= b.len();
        let mut line = &b[start..*i];
        if !eof {
            *i += 1;
        }
        if let Some(l) = line.strip_suffix(b"\r") {
            line = l;
        }
        (String::from_utf8_lossy(line).into_owned(), eof)
    };
    let skip_comment = |i: &mut usize| loop {
        let (line, eof) = to_eol(i);
        if !line.trim_end_matches(' ').ends_with('\\') || eof {
            break;
        }
    };
    while i < b.len() {
        let c = b[i];
        i += 1;
        if c == b'[' {
            let Some(end) = b[i..].iter().position(|&x| x == b']') else {
                return Err("unable to find end of section".into());
            };
            let name = String::from_utf8_lossy(&b[i..i + end]).into_owned();
            i += end + 1;
            let (garbage, _) = to_eol(&mut i);
            if !garbage.trim().is_empty() {
                let prev = section.clone().unwrap_or_default();
                return Err(format!(
                    "found garbage after section name {prev}: {:?}",
                    garbage.trim()
                ));
            }
            section = Some(name);
            continue;
        }
        if c == b'#' || c == b';' {
            skip_comment(&mut i);
            continue;
        }
        let Some(sec) = section.clone() else {
            // Before the first section, go-systemd skips anything that is not `[`.
            continue;
        };
        if c.is_ascii_whitespace() {
            continue;
        }
        // Option name up to '='.
        let start = i - 1;
        loop {
            match b.get(i) {
                None => return Err("EOF".into()),
                Some(b'\n') | Some(b'\r') => {
                    return Err("unexpected newline encountered while parsing option name".into());
                }
                Some(b'=') => break,
                Some(_) => i += 1,
            }
        }
        let name = String::from_utf8_lossy(&b[start..i]).trim().to_string();
        i += 1;
        let mut value = String::new();
        loop {
            let (line, eof) = to_eol(&mut i);
            if line.trim().is_empty() {
                break;
            }
            value.push_str(&line);
            if line.ends_with('\\') {
                if !eof {
                    value.push('\n');
                }
                continue;
            }
            break;
        }
        let value = if value.ends_with('\n') {
            format!("{}\n", value.trim())
        } else {
            value.trim().to_string()
        };
        opts.push(UnitOption {
            section: sec,
            name,
            value,
        });
    }
    Ok(opts)
}

/// Whether the options include an `[Install]` section entry.
pub fn has_install_section(opts: &[UnitOption]) -> bool {
    opts.iter().any(|o| o.section == "Install")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table() {
        let ok = parse_unit("# c\n[Unit]\nDescription=x\n\n[Service]\nExecStart=/bin/a \\\n  b\n[Install]\nWantedBy=multi-user.target\n").unwrap();
        assert_eq!(ok.len(), 3);
        assert_eq!(ok[1].value, "/bin/a \\\n  b");
        assert!(has_install_section(&ok));
        assert!(parse_unit("").unwrap().is_empty());
        assert_eq!(
            parse_unit("junk before\n[Unit]\nA=b"),
            Ok(vec![UnitOption {
                section: "Unit".into(),
                name: "A".into(),
                value: "b".into()
            }])
        );
        for (bad, want) in [
            (
                "[Unit",
                "invalid unit content: unable to find end of section",
            ),
            (
                "[Unit] x\n",
                "invalid unit content: found garbage after section name : \"x\"",
            ),
            (
                "[Unit]\nFoo\n",
                "invalid unit content: unexpected newline encountered while parsing option name",
            ),
            ("[Unit]\nFoo", "invalid unit content: EOF"),
        ] {
            assert_eq!(parse_unit(bad).unwrap_err(), want, "{bad:?}");
        }
        assert_eq!(
            parse_unit(&format!("[Unit]\nA={}\n", "x".repeat(3000))),
            Err("invalid unit content: line too long (max 2048 bytes)".into())
        );
    }
}
