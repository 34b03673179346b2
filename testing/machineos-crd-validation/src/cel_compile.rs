//! Compiling a rule of `x-kubernetes-validations` when a schema is loaded: parsing with
//! CEL's optional syntax, and the one rewrite the `cel` crate needs for rules with
//! `optionalOldSelf` (cel-go lets a plain field selection on an optional yield an
//! optional; the `cel` crate only does so for `.?` selections, which mean the same).

use kube_cel::cel;

/// Parses a CEL expression (optional syntax enabled).
pub fn compile(src: &str) -> Result<cel::IdedExpr, String> {
    cel::parser::Parser::new()
        .enable_optional_syntax(true)
        .parse(src)
        .map_err(|e| e.to_string())
}

/// Rewrites field selections chained on `oldSelf` into optional selections:
/// `oldSelf.spec.pool.name.value()` → `oldSelf.?spec.?pool.?name.value()`. Calls (a name
/// followed by `(`) and text inside string literals are left alone.
pub fn rewrite_optional_old_self(rule: &str) -> String {
    let b = rule.as_bytes();
    // Bytes: string literals are copied byte for byte (any UTF-8 in them stays whole);
    // only ASCII is inserted.
    let mut out: Vec<u8> = Vec::with_capacity(rule.len() + 8);
    let mut i = 0;
    let mut quote: Option<u8> = None;
    while i < b.len() {
        let c = b[i];
        if let Some(q) = quote {
            out.push(c);
            if c == b'\\' && i + 1 < b.len() {
                out.push(b[i + 1]);
                i += 2;
                continue;
            }
            if c == q {
                quote = None;
            }
            i += 1;
            continue;
        }
        if c == b'\'' || c == b'"' {
            quote = Some(c);
            out.push(c);
            i += 1;
            continue;
        }
        let word_start =
            i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'.');
        if word_start && rule[i..].starts_with("oldSelf") {
            let after = i + "oldSelf".len();
            let boundary =
                after >= b.len() || !(b[after].is_ascii_alphanumeric() || b[after] == b'_');
            if boundary {
                out.extend_from_slice(b"oldSelf");
                i = after;
                // Chained `.name` selections.
                while i < b.len() && b[i] == b'.' {
                    let mut j = i + 1;
                    while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
                        j += 1;
                    }
                    if j == i + 1 {
                        break;
                    }
                    let name = &rule[i + 1..j];
                    let mut k = j;
                    while k < b.len() && b[k] == b' ' {
                        k += 1;
                    }
                    if k < b.len() && b[k] == b'(' {
                        // A method call ends the chain.
                        out.push(b'.');
                        out.extend_from_slice(name.as_bytes());
                        i = j;
                        break;
                    }
                    out.extend_from_slice(b".?");
                    out.extend_from_slice(name.as_bytes());
                    i = j;
                }
                continue;
            }
        }
        // Copy one UTF-8 character.
        let ch_len = rule[i..].chars().next().map_or(1, char::len_utf8);
        out.extend_from_slice(&b[i..i + ch_len]);
        i += ch_len;
    }
    String::from_utf8(out).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn string_literals_keep_their_utf8() {
        assert_eq!(
            rewrite_optional_old_self("oldSelf.x == 'é' || oldSelf.y == \"日本\""),
            "oldSelf.?x == 'é' || oldSelf.?y == \"日本\""
        );
    }

    #[test]
    fn optional_old_self_rewrite() {
        let r = "self.metadata.name == self.spec.machineConfigPool.name || oldSelf.hasValue() && oldSelf.spec.machineConfigPool.name.value() == self.spec.machineConfigPool.name";
        assert_eq!(
            rewrite_optional_old_self(r),
            "self.metadata.name == self.spec.machineConfigPool.name || oldSelf.hasValue() && oldSelf.?spec.?machineConfigPool.?name.value() == self.spec.machineConfigPool.name"
        );
        assert_eq!(
            rewrite_optional_old_self("'oldSelf.x' == oldSelf.x"),
            "'oldSelf.x' == oldSelf.?x"
        );
        assert_eq!(rewrite_optional_old_self("myoldSelf.x"), "myoldSelf.x");
    }
}
