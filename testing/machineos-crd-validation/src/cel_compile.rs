//! Compiling a rule of `x-kubernetes-validations` when a schema is loaded: parsing with
//! CEL's optional syntax, then one pass over the parsed expression where the `cel` crate
//! and cel-go differ on optionals:
//!
//! * every optional field selection (`a.?f`) calls [`OPT_SELECT`] (cel 0.13's own `_?._`
//!   fails on a map without the key where cel-go yields `optional.none()`, and wraps a
//!   selection on `optional.of(v)` twice);
//! * a plain field selection on an optional is an optional selection too, as cel-go
//!   evaluates it: after a `.?` (`self.?status.mode.orValue("")`, as openshift/api's
//!   MachineConfiguration rules write them), and on `oldSelf` in a rule with
//!   `optionalOldSelf` (`oldSelf.spec.x.value()`), where `oldSelf` is an optional. `has()`
//!   tests and calls are left as they are.
//!
//! Done on the parsed expression, not its text, so spacing, comments, parentheses and
//! string literals cannot mislead it.

use kube_cel::cel;

/// The function every optional field selection (`a.?f`) is evaluated by. See
/// `cel_eval::opt_select`.
pub const OPT_SELECT: &str = "machineos_opt_select";

/// Parses a CEL expression (optional syntax enabled), with every optional field selection
/// calling [`OPT_SELECT`] and the selections on optionals made optional (see the module
/// documentation); `optional_old_self`: `oldSelf` is an optional (`optionalOldSelf`).
pub fn compile(src: &str, optional_old_self: bool) -> Result<cel::IdedExpr, String> {
    let mut expr = cel::parser::Parser::new()
        .enable_optional_syntax(true)
        .parse(src)
        .map_err(|e| e.to_string())?;
    route_optional_selections(&mut expr, optional_old_self);
    Ok(expr)
}

/// Whether `expr` evaluates to an optional as far as field selection is concerned: an
/// optional selection, or `oldSelf` when it is one.
fn is_optional(expr: &cel::IdedExpr, optional_old_self: bool) -> bool {
    use cel::common::ast::Expr;
    match &expr.expr {
        Expr::Call(call) => call.func_name == OPT_SELECT,
        Expr::Ident(name) => optional_old_self && name == "oldSelf",
        _ => false,
    }
}

/// The pass of [`compile`], at any depth.
fn route_optional_selections(expr: &mut cel::IdedExpr, optional_old_self: bool) {
    use cel::common::ast::{CallExpr, EntryExpr, Expr, IdedExpr, LiteralValue};
    let route = |e: &mut IdedExpr| route_optional_selections(e, optional_old_self);
    match &mut expr.expr {
        Expr::Call(call) => {
            if call.func_name == cel::common::ast::operators::OPT_SELECT {
                call.func_name = OPT_SELECT.to_owned();
            }
            if let Some(target) = &mut call.target {
                route(target);
            }
            call.args.iter_mut().for_each(route);
        }
        Expr::Select(s) => {
            route(&mut s.operand);
            if !s.test && is_optional(&s.operand, optional_old_self) {
                let operand = std::mem::take(&mut *s.operand);
                let field = IdedExpr {
                    id: expr.id,
                    expr: Expr::Literal(LiteralValue::String(s.field.as_str().into())),
                };
                expr.expr = Expr::Call(CallExpr {
                    func_name: OPT_SELECT.to_owned(),
                    target: None,
                    args: vec![operand, field],
                });
            }
        }
        Expr::Comprehension(c) => {
            for e in [
                &mut c.iter_range,
                &mut c.accu_init,
                &mut c.loop_cond,
                &mut c.loop_step,
                &mut c.result,
            ] {
                route(e);
            }
        }
        Expr::List(l) => l.elements.iter_mut().for_each(route),
        Expr::Map(m) => {
            for entry in &mut m.entries {
                if let EntryExpr::MapEntry(e) = &mut entry.expr {
                    route(&mut e.key);
                    route(&mut e.value);
                }
            }
        }
        Expr::Struct(s) => {
            for entry in &mut s.entries {
                if let EntryExpr::StructField(f) = &mut entry.expr {
                    route(&mut f.value);
                }
            }
        }
        Expr::Unspecified | Expr::Ident(_) | Expr::Literal(_) => {}
    }
}
