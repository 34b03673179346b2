//! Compiling a rule of `x-kubernetes-validations` when a schema is loaded: parsing with
//! CEL's optional syntax, and the rewrites the `cel` crate needs where cel-go lets a plain
//! field selection on an optional yield an optional (the `cel` crate only does so for `.?`
//! selections, which mean the same on an optional):
//!
//! * [`rewrite_optional_old_self`], for rules with `optionalOldSelf` (`oldSelf` is an
//!   optional there);
//! * [`rewrite_optional_chains`], for every rule: the selections chained after a `.?`
//!   selection (`self.?status.mode.orValue("")`, as openshift/api's MachineConfiguration
//!   writes them: `.?status` is an optional, so `.mode` on it is one too).

use kube_cel::cel;

/// The function every optional field selection (`a.?f`) is evaluated by: cel 0.13's own
/// (`_?._`) fails on a map without the key where cel-go yields `optional.none()`, and wraps
/// a selection on `optional.of(v)` twice. See `cel_eval::opt_select`.
pub const OPT_SELECT: &str = "machineos_opt_select";

/// Parses a CEL expression (optional syntax enabled), with every optional field selection
/// calling [`OPT_SELECT`].
pub fn compile(src: &str) -> Result<cel::IdedExpr, String> {
    let mut expr = cel::parser::Parser::new()
        .enable_optional_syntax(true)
        .parse(src)
        .map_err(|e| e.to_string())?;
    route_optional_selections(&mut expr);
    Ok(expr)
}

/// Renames the `_?._` calls of `expr` (at any depth) to [`OPT_SELECT`].
fn route_optional_selections(expr: &mut cel::IdedExpr) {
    use cel::common::ast::{EntryExpr, Expr};
    match &mut expr.expr {
        Expr::Call(call) => {
            if call.func_name == cel::common::ast::operators::OPT_SELECT {
                call.func_name = OPT_SELECT.to_owned();
            }
            if let Some(target) = &mut call.target {
                route_optional_selections(target);
            }
            call.args.iter_mut().for_each(route_optional_selections);
        }
        Expr::Comprehension(c) => {
            for e in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                route_optional_selections(e);
            }
        }
        Expr::List(l) => l.elements.iter_mut().for_each(route_optional_selections),
        Expr::Map(m) => {
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(e) = &mut entry.expr {
                    route_optional_selections(&mut e.key);
                    route_optional_selections(&mut e.value);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &mut s.entries {
                if let EntryExpr::StructField(f) = &mut entry.expr {
                    route_optional_selections(&mut f.value);
                }
            }
        }
        Expr::Select(s) => route_optional_selections(&mut s.operand),
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
}

/// Rewrites field selections chained on `oldSelf` into optional selections:
/// `oldSelf.spec.pool.name.value()` → `oldSelf.?spec.?pool.?name.value()`. Calls (a name
/// followed by `(`) and text inside string literals are left alone.
pub fn rewrite_optional_old_self(rule: &str) -> String {
    optional_chains_after(rule, |b, i| {
        let word_start =
            i == 0 || !(b[i - 1].is_ascii_alphanumeric() || b[i - 1] == b'_' || b[i - 1] == b'.');
        let after = i + "oldSelf".len();
        let boundary = after >= b.len() || !(b[after].is_ascii_alphanumeric() || b[after] == b'_');
        (word_start && b[i..].starts_with(b"oldSelf") && boundary).then_some(after)
    })
}

/// Rewrites the plain field selections chained after a `.?` selection into optional ones:
/// `self.?status.a.b.orValue(1)` → `self.?status.?a.?b.orValue(1)`. A call (a name followed
/// by `(`) ends the chain; text inside string literals is left alone.
pub fn rewrite_optional_chains(rule: &str) -> String {
    optional_chains_after(rule, |b, i| {
        if b[i] != b'.' || b.get(i + 1) != Some(&b'?') {
            return None;
        }
        let end = ident_end(b, i + 2);
        (end > i + 2).then_some(end)
    })
}

/// The end of the identifier starting at `from` (`from` itself when there is none).
fn ident_end(b: &[u8], from: usize) -> usize {
    let mut j = from;
    while j < b.len() && (b[j].is_ascii_alphanumeric() || b[j] == b'_') {
        j += 1;
    }
    j
}

/// `rule` copied — string literals byte for byte (any UTF-8 in them stays whole; only ASCII
/// is inserted) — with, wherever `head` finds a chain head outside them (returning where it
/// ends), the plain `.name` selections chained after the head turned into `.?name`; a call
/// (a name followed by `(`) or anything else ends the chain.
fn optional_chains_after(rule: &str, head: impl Fn(&[u8], usize) -> Option<usize>) -> String {
    let b = rule.as_bytes();
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
        if let Some(end) = head(b, i) {
            out.extend_from_slice(&b[i..end]);
            i = end;
            while i < b.len() && b[i] == b'.' {
                let j = ident_end(b, i + 1);
                if j == i + 1 {
                    break;
                }
                let mut k = j;
                while k < b.len() && b[k] == b' ' {
                    k += 1;
                }
                if k < b.len() && b[k] == b'(' {
                    break;
                }
                out.extend_from_slice(b".?");
                out.extend_from_slice(&b[i + 1..j]);
                i = j;
            }
            continue;
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
    fn optional_chains_rewrite() {
        let r = "self.?status.bootImageSkewEnforcementStatus.mode.orValue(\"\") == 'Automatic' ? self.?spec.managedBootImages.hasValue() : true";
        assert_eq!(
            rewrite_optional_chains(r),
            "self.?status.?bootImageSkewEnforcementStatus.?mode.orValue(\"\") == 'Automatic' ? self.?spec.?managedBootImages.hasValue() : true"
        );
        // Plain selections, strings and an already optional chain stay as they are.
        for same in [
            "self.a.b == 'x.?y.z'",
            "self.?a.?b.orValue(1) == 1",
            "self.spec.x.exists(m, m.a == 'b')",
        ] {
            assert_eq!(rewrite_optional_chains(same), same);
        }
        assert_eq!(
            rewrite_optional_chains("size(self.?a.b.c.orValue([])) > 0 && self.d.e"),
            "size(self.?a.?b.?c.orValue([])) > 0 && self.d.e"
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
