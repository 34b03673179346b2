//! What yaml.v2's reader and scanner do to the JSON text Go's encoder wrote. Go escapes
//! every control character below U+0020, `"`, `\`, `<`, `>`, `&`, U+2028 and U+2029;
//! everything else is raw, so three things can happen:
//!
//! * the reader refuses U+007F, the C1 controls but NEL, U+FFFE and U+FFFF anywhere
//!   (`readerc.go`: "control characters are not allowed");
//! * a raw NEL (U+0085) is a line break inside a double-quoted scalar, folded as YAML
//!   folds quoted scalars ([`fold`]); in a key it makes a multi-line key the parser
//!   refuses; followed by `---` or `...` and a blank it is a document marker;
//! * lines are counted by NELs, for yaml.v2's "line N" in its messages.
//!
//! The reader decodes ahead of the scanner (a raw buffer of 512 bytes at a time), so a
//! refused character is reported before a parse error earlier in the text; here it
//! always is (exact for texts within the look-ahead, the only case the golden corpus
//! can tell apart).

use crate::{GoYamlError, push_key};
use serde_json::Value;

const NEL: char = '\u{85}';

/// Walks `value` in the order Go's encoder writes it (object keys sorted by bytes),
/// counting line breaks in `line`: for refused characters only (`reader`), or for the
/// scanner's and parser's errors.
pub(super) fn check(
    value: &Value,
    path: &mut String,
    line: &mut usize,
    reader: bool,
) -> Result<(), GoYamlError> {
    match value {
        Value::String(s) => string(s, path, line, reader),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = path.len();
                path.push_str(&format!("[{i}]"));
                check(item, path, line, reader)?;
                path.truncate(len);
            }
            Ok(())
        }
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            for key in keys {
                let len = path.len();
                push_key(path, key);
                string(key, path, line, reader)?;
                if !reader && key.contains(NEL) {
                    return Err(GoYamlError::KeyLineBreak {
                        path: path.clone(),
                        line: *line,
                    });
                }
                check(&map[key.as_str()], path, line, reader)?;
                path.truncate(len);
            }
            Ok(())
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => Ok(()),
    }
}

fn string(s: &str, path: &str, line: &mut usize, reader: bool) -> Result<(), GoYamlError> {
    let chars: Vec<char> = s.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        let code = u32::from(c);
        if reader
            && (code == 0x7F
                || ((0x80..=0x9F).contains(&code) && c != NEL)
                || code == 0xFFFE
                || code == 0xFFFF)
        {
            return Err(GoYamlError::ControlCharacters {
                path: path.to_owned(),
                character: c,
            });
        }
        if !reader && c == NEL {
            *line += 1;
            let next: String = chars[i + 1..].iter().take(3).collect();
            let blank_after = matches!(chars.get(i + 4).copied(), Some(' ' | NEL));
            if (next == "---" || next == "...") && blank_after {
                return Err(GoYamlError::DocumentIndicator {
                    path: path.to_owned(),
                    line: *line + 1,
                });
            }
        }
    }
    Ok(())
}

/// The value yaml.v2's scanner reads from the double-quoted JSON string `s`
/// (`yaml_parser_scan_flow_scalar`): at a raw NEL, the spaces before it are dropped,
/// the spaces after it skipped, and the breaks folded — one break becomes a space, each
/// further one a `\n`.
pub(super) fn fold(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains(NEL) {
        return s.into();
    }
    let chars: Vec<char> = s.chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < chars.len() {
        // Non-blank characters.
        while i < chars.len() && chars[i] != ' ' && chars[i] != NEL {
            out.push(chars[i]);
            i += 1;
        }
        let mut whitespaces = String::new();
        let mut leading_blanks = false;
        let mut trailing_breaks = String::new();
        while i < chars.len() && (chars[i] == ' ' || chars[i] == NEL) {
            if chars[i] == ' ' {
                if !leading_blanks {
                    whitespaces.push(' ');
                }
            } else if !leading_blanks {
                whitespaces.clear();
                leading_blanks = true;
            } else {
                trailing_breaks.push('\n');
            }
            i += 1;
        }
        if leading_blanks {
            if trailing_breaks.is_empty() {
                out.push(' ');
            } else {
                out.push_str(&trailing_breaks);
            }
        } else {
            out.push_str(&whitespaces);
        }
    }
    out.into()
}
