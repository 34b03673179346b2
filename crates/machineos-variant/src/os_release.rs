//! The os-release(5) file format: newline-separated `KEY=value` assignments in the subset of
//! shell syntax the freedesktop specification allows.
//!
//! The rules, as this parser applies them:
//! - Blank lines (whitespace only) and lines whose first non-blank character is `#` are
//!   ignored.
//! - A key is `[A-Za-z_][A-Za-z0-9_]*`; nothing may separate it from the `=`. Leading and
//!   trailing blanks of the line are ignored.
//! - A value is one of: a double-quoted string, where a backslash escapes `"`, `\`, `$` and
//!   `` ` `` (before any other character the backslash is kept, as the shell keeps it); a
//!   single-quoted string, taken literally; or an unquoted word, where a backslash escapes
//!   the next character and whitespace, quotes, `$`, `` ` `` and `;` are not allowed.
//!   An empty value (`KEY=`) is the empty string.
//! - Several quoted strings concatenated (`A="x""y"`), text after a closing quote, an
//!   unterminated quote, a line without `=`, and a malformed key make the line invalid.
//!   **Invalid lines are skipped and each is reported as a [`Warning`]** whose path is
//!   `<file>:<line number>`; the other lines still count.
//! - A key given twice keeps its last value (what sourcing the file in a shell gives).
//!
//! Why a hand-written parser: the `os-release` crate on crates.io is small, unmaintained and
//! does not implement the quoting and escaping rules above (it strips quote characters from
//! the ends of values); the format is about forty lines of rules, and this parser must never
//! fail or panic on whatever an image carries.

use std::collections::BTreeMap;

use machineos_diagnostics::Warning;

/// A parsed os-release file: every valid assignment, plus the warnings of invalid lines.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OsRelease {
    /// Every key with its (unquoted, unescaped) value.
    pub fields: BTreeMap<String, String>,
    /// One warning per invalid line that was skipped.
    pub warnings: Vec<Warning>,
}

impl OsRelease {
    /// The value of `key`, if the file sets it.
    pub fn get(&self, key: &str) -> Option<&str> {
        self.fields.get(key).map(String::as_str)
    }

    /// The value of `key` if it is set and not empty.
    pub fn non_empty(&self, key: &str) -> Option<&str> {
        self.get(key).filter(|v| !v.is_empty())
    }
}

/// Parses `text`, the contents of an os-release file named `file` (used in warnings only,
/// e.g. `/usr/lib/os-release`). Never fails: invalid lines become warnings.
pub fn parse(file: &str, text: &str) -> OsRelease {
    let mut out = OsRelease::default();
    for (i, raw) in text.lines().enumerate() {
        let line = raw.trim_matches(|c: char| c == ' ' || c == '\t' || c == '\r');
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line) {
            Ok((key, value)) => {
                out.fields.insert(key.to_owned(), value);
            }
            Err(why) => out.warnings.push(Warning::new(
                format!("{file}:{}", i + 1),
                format!("invalid os-release line skipped: {why}"),
            )),
        }
    }
    out
}

fn parse_line(line: &str) -> Result<(&str, String), String> {
    let Some((key, rest)) = line.split_once('=') else {
        return Err("no `=`".into());
    };
    let mut chars = key.chars();
    let key_ok = chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_');
    if !key_ok {
        return Err(format!(
            "key {key:?} is not a variable name ([A-Za-z_][A-Za-z0-9_]*)"
        ));
    }
    let value = match rest.chars().next() {
        Some('"') => double_quoted(&rest[1..])?,
        Some('\'') => single_quoted(&rest[1..])?,
        _ => unquoted(rest)?,
    };
    Ok((key, value))
}

/// After the opening `"`: the value up to the closing quote, which must end the line.
fn double_quoted(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '"' => return end_of_value(&s[i + 1..]).map(|()| out),
            '\\' => match chars.next() {
                Some((_, e @ ('"' | '\\' | '$' | '`'))) => out.push(e),
                Some((_, e)) => {
                    out.push('\\');
                    out.push(e);
                }
                None => return Err("unterminated double quote".into()),
            },
            c => out.push(c),
        }
    }
    Err("unterminated double quote".into())
}

/// After the opening `'`: the value up to the closing quote, which must end the line.
fn single_quoted(s: &str) -> Result<String, String> {
    match s.find('\'') {
        Some(end) => end_of_value(&s[end + 1..]).map(|()| s[..end].to_owned()),
        None => Err("unterminated single quote".into()),
    }
}

fn end_of_value(rest: &str) -> Result<(), String> {
    if rest.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "text after the closing quote ({rest:?}); concatenated strings are not supported"
        ))
    }
}

fn unquoted(s: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some(e) => out.push(e),
                None => return Err("a backslash ends the line".into()),
            },
            c if c.is_whitespace() || "\"'$`;".contains(c) => {
                return Err(format!(
                    "unquoted value contains {c:?}; values with spaces or shell special characters must be quoted"
                ));
            }
            c => out.push(c),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_escapes() {
        let text = "# a comment\n\n  \nA=plain\nB=\"two words\"\nC='single $literal \\n'\nD=\"esc \\\" \\\\ \\$ \\` \\n\"\nE=\nF=\"\"\nG=a\\ b\n  H=trimmed  \nA=again\n";
        let r = parse("/usr/lib/os-release", text);
        assert_eq!(r.warnings, vec![]);
        let want = [
            ("A", "again"),
            ("B", "two words"),
            ("C", "single $literal \\n"),
            ("D", "esc \" \\ $ ` \\n"),
            ("E", ""),
            ("F", ""),
            ("G", "a b"),
            ("H", "trimmed"),
        ];
        let got: Vec<(&str, &str)> = r
            .fields
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        assert_eq!(got, want);
        assert_eq!(r.non_empty("E"), None);
        assert_eq!(r.get("E"), Some(""));
    }

    #[test]
    fn invalid_lines_are_skipped_with_a_warning_each() {
        let text = "ID=fedora\nno equals sign\n1KEY=x\nKEY X=y\nA=\"open\nB='open\nC=\"x\"\"y\"\nD='x'tail\nE=two words\nF=$HOME\nG=x\\\nVARIANT_ID=coreos\n";
        let r = parse("os-release", text);
        assert_eq!(r.get("ID"), Some("fedora"));
        assert_eq!(r.get("VARIANT_ID"), Some("coreos"));
        assert_eq!(r.fields.len(), 2, "{:?}", r.fields);
        let lines: Vec<&str> = r.warnings.iter().map(|w| w.path.as_str()).collect();
        assert_eq!(
            lines,
            [
                "os-release:2",
                "os-release:3",
                "os-release:4",
                "os-release:5",
                "os-release:6",
                "os-release:7",
                "os-release:8",
                "os-release:9",
                "os-release:10",
                "os-release:11"
            ]
        );
        for (w, text) in r.warnings.iter().zip([
            "no `=`",
            "not a variable name",
            "not a variable name",
            "unterminated double quote",
            "unterminated single quote",
            "concatenated",
            "after the closing quote",
            "must be quoted",
            "must be quoted",
            "backslash ends",
        ]) {
            assert!(w.message.contains(text), "{w}");
        }
    }

    #[test]
    fn never_panics_on_odd_bytes() {
        for text in [
            "=",
            "\"",
            "A=\"\\",
            "A='",
            "é=1",
            "A=é",
            "\u{0}=\u{0}",
            "A=\"\\é\"",
        ] {
            let _ = parse("f", text);
        }
        assert_eq!(parse("f", "A=\"\\é\"").get("A"), Some("\\é"));
        assert_eq!(parse("f", "A=é").get("A"), Some("é"));
    }
}
