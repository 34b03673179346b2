//! Go RE2 regular expressions (OpenAPI `pattern`, CEL `matches()`) on the `regex` crate.
//!
//! The `regex` crate implements RE2's syntax and its linear-time semantics, so patterns
//! mean the same with one family of exceptions, handled here: in RE2 the Perl classes
//! `\d`, `\w`, `\s` and the word boundaries `\b`/`\B` are ASCII-only, in `regex` they are
//! Unicode by default. [`translate`] rewrites them to explicit ASCII classes (`[0-9]`,
//! `[0-9A-Za-z_]`, …, inside brackets too) and `(?-u:\b)`. Remaining differences, none of
//! which the MCO schemas use: `regex` rejects a few constructs RE2 accepts (e.g. `\Q…\E`,
//! `\C`), which makes [`compile`] fail and the schema unusable rather than silently
//! different. Matching is unanchored, as Go's `MatchString`.

/// Compiles an RE2 pattern with RE2's ASCII Perl classes.
pub fn compile(pattern: &str) -> Result<regex::Regex, regex::Error> {
    regex::Regex::new(&translate(pattern))
}

/// Rewrites `\d \w \s \b \B` (and their negations) to ASCII-only forms, outside and
/// inside bracket expressions.
pub fn translate(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len() + 8);
    let mut in_class = false;
    let mut chars = pattern.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                let Some(e) = chars.next() else {
                    out.push('\\');
                    break;
                };
                let class = match e {
                    'd' => Some(("0-9", "[0-9]")),
                    'D' => Some(("[:^digit:]", "[^0-9]")),
                    'w' => Some(("0-9A-Za-z_", "[0-9A-Za-z_]")),
                    'W' => Some(("[:^word:]", "[^0-9A-Za-z_]")),
                    's' => Some(("\\t\\n\\f\\r ", "[\\t\\n\\f\\r ]")),
                    'S' => Some(("[:^space:]", "[^\\t\\n\\f\\r ]")),
                    _ => None,
                };
                match (class, e) {
                    (Some((inside, outside)), _) => {
                        out.push_str(if in_class { inside } else { outside })
                    }
                    (None, 'b' | 'B') if !in_class => {
                        out.push_str("(?-u:\\");
                        out.push(e);
                        out.push(')');
                    }
                    (None, _) => {
                        out.push('\\');
                        out.push(e);
                    }
                }
            }
            '[' if !in_class => {
                in_class = true;
                out.push('[');
                if chars.peek() == Some(&'^') {
                    chars.next();
                    out.push('^');
                }
                if chars.peek() == Some(&']') {
                    chars.next();
                    out.push(']');
                }
            }
            '[' if chars.peek() == Some(&':') => {
                // A POSIX class `[:name:]` inside a bracket expression.
                out.push('[');
                for d in chars.by_ref() {
                    out.push(d);
                    if d == ']' {
                        break;
                    }
                }
            }
            ']' if in_class => {
                in_class = false;
                out.push(']');
            }
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ascii_perl_classes() {
        let re = compile(r"^\d+$").unwrap();
        assert!(re.is_match("123"));
        assert!(
            !re.is_match("١٢٣"),
            "Arabic-Indic digits are not \\d in RE2"
        );
        let re = compile(r"^[\d.]+$").unwrap();
        assert!(re.is_match("1.2"));
        assert!(!re.is_match("١"));
        let re = compile(r"^[^\s]+\\d$").unwrap();
        assert!(re.is_match("ab\\d"));
        let re = compile(r"^[a-z\-]+\w$").unwrap();
        assert!(re.is_match("a-b_"));
        assert!(!re.is_match("a-bé"));
    }

    #[test]
    fn mco_patterns_compile() {
        for p in [
            r"^([a-zA-Z0-9-]+\.)+[a-zA-Z0-9-]+(:[0-9]{2,5})?(/[a-zA-Z0-9-_]{1,61})*/[a-zA-Z0-9-_.]+:[a-zA-Z0-9._-]+$",
            r"^[^.]+\.[^.]+\.svc:\d+\/[^\/]+\/[^\/]+:[^\/]+$",
            r"^([a-zA-Z0-9-]+\.)+[a-zA-Z0-9-]+(:[0-9]{2,5})?/([a-zA-Z0-9-_]{0,61}/)?[a-zA-Z0-9-_.]*?$",
            r"^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$",
        ] {
            compile(p).unwrap();
        }
        assert!(
            compile(r"^[^.]+\.[^.]+\.svc:\d+\/[^\/]+\/[^\/]+:[^\/]+$")
                .unwrap()
                .is_match("image-registry.openshift-image-registry.svc:5000/ns/img:latest")
        );
    }
}
