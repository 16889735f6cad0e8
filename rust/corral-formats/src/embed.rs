//! Embedding one grammar's rules in another: rule names made unique by a prefix.

use corral_core::ebnf::{Expr, GrammarAst, PermSpec, RuleDef};
use std::sync::Arc;

/// `ast`'s rules with every rule name (definitions and references) prefixed by `prefix`, so
/// they can sit beside other rules. The root `r` becomes `{prefix}{r}`.
pub fn prefixed(ast: GrammarAst, prefix: &str) -> Vec<RuleDef> {
    ast.rules
        .into_iter()
        .map(|r| RuleDef { name: format!("{prefix}{}", r.name), expr: rename(r.expr, prefix), offset: r.offset })
        .collect()
}

/// `e` with every rule reference prefixed by `prefix`.
pub fn rename(e: Expr, prefix: &str) -> Expr {
    match e {
        Expr::Seq(v) => Expr::Seq(v.into_iter().map(|x| rename(x, prefix)).collect()),
        Expr::Alt(v) => Expr::Alt(v.into_iter().map(|x| rename(x, prefix)).collect()),
        Expr::Repeat { inner, min, max } => Expr::Repeat { inner: Box::new(rename(*inner, prefix)), min, max },
        Expr::Ref { name, offset } => Expr::Ref { name: format!("{prefix}{name}"), offset },
        Expr::Token(inner) => {
            if has_ref(&inner) {
                Expr::Token(Arc::new(rename((*inner).clone(), prefix)))
            } else {
                Expr::Token(inner)
            }
        }
        Expr::Perm(p) => {
            let PermSpec { members, extra, sep, min, max } = *p;
            Expr::Perm(Box::new(PermSpec {
                members: members.into_iter().map(|(m, req)| (rename(m, prefix), req)).collect(),
                extra: extra.map(|x| rename(x, prefix)),
                sep: rename(sep, prefix),
                min,
                max,
            }))
        }
        e @ (Expr::Literal(_) | Expr::Terminal(_) | Expr::Tokens(_)) => e,
    }
}

fn has_ref(e: &Expr) -> bool {
    match e {
        Expr::Seq(v) | Expr::Alt(v) => v.iter().any(has_ref),
        Expr::Repeat { inner, .. } => has_ref(inner),
        Expr::Ref { .. } => true,
        Expr::Token(inner) => has_ref(inner),
        Expr::Perm(p) => p.members.iter().any(|(m, _)| has_ref(m)) || p.extra.as_ref().is_some_and(has_ref) || has_ref(&p.sep),
        Expr::Literal(_) | Expr::Terminal(_) | Expr::Tokens(_) => false,
    }
}

/// The rules of JSON Schema `schema` under `prefix` (root rule `{prefix}root`), compiled with
/// `opts`; `at` says where the schema sits, for errors.
pub fn schema_rules(schema: &serde_json::Value, opts: &corral_schema::Options, prefix: &str, at: &str) -> crate::Result<(Vec<RuleDef>, String)> {
    let (ast, _warnings) = corral_schema::big_stack::on_big_stack(|| corral_schema::compile_schema_rules(schema, opts))
        .map_err(|source| crate::FormatError::Schema { at: at.to_string(), source })?;
    Ok((prefixed(ast, prefix), format!("{prefix}root")))
}

/// Removes the whitespace a flexible JSON layout puts before and after the root value of the
/// schema rules `rules` (root rule `root`), when the root rule is exactly
/// `ws value ws`: embedded JSON sits directly between the surrounding delimiters.
pub fn strip_root_whitespace(rules: &mut [RuleDef], root: &str) {
    for r in rules.iter_mut().filter(|r| r.name == root) {
        if let Expr::Seq(v) = &r.expr {
            if v.len() == 3 && v[0] == v[2] && is_whitespace_run(&v[0]) {
                r.expr = v[1].clone();
            }
        }
    }
}

/// Whether `e` is a JSON layout's whitespace run `[ \t\n\r]{0,n}`.
fn is_whitespace_run(e: &Expr) -> bool {
    let Expr::Terminal(corral_core::Rx::Repeat { inner, min: 0, max: Some(_) }) = e else { return false };
    matches!(&**inner, corral_core::Rx::Bytes(b) if b.iter().all(|&(lo, hi)| b" \t\n\r".contains(&lo) && b" \t\n\r".contains(&hi) || (lo, hi) == (b'\t', b'\n')))
}

/// Makes every whitespace run `[ \t\n\r]{0,bound}` in `e` unbounded (a layout compiled with
/// `bound` standing for "no bound").
pub fn unbound_whitespace(e: &mut Expr, bound: u32) {
    use corral_core::Rx;
    fn rx(r: &Rx, bound: u32) -> Option<Rx> {
        match r {
            Rx::Repeat { inner, min, max: Some(m) } if *m == bound => Some(Rx::Repeat { inner: inner.clone(), min: *min, max: None }),
            Rx::Repeat { inner, min, max } => rx(inner, bound).map(|i| Rx::Repeat { inner: Arc::new(i), min: *min, max: *max }),
            Rx::Concat(l) | Rx::Alt(l) => {
                let changed: Vec<Option<Rx>> = l.iter().map(|x| rx(x, bound)).collect();
                if changed.iter().all(Option::is_none) {
                    return None;
                }
                let items: Vec<Rx> = changed.into_iter().zip(l.iter()).map(|(c, x)| c.unwrap_or_else(|| x.clone())).collect();
                Some(if matches!(r, Rx::Concat(_)) { Rx::Concat(items.into()) } else { Rx::Alt(items.into()) })
            }
            _ => None,
        }
    }
    match e {
        Expr::Terminal(r) => {
            if let Some(n) = rx(r, bound) {
                *r = n;
            }
        }
        Expr::Seq(v) | Expr::Alt(v) => v.iter_mut().for_each(|x| unbound_whitespace(x, bound)),
        Expr::Repeat { inner, .. } => unbound_whitespace(inner, bound),
        Expr::Token(inner) => {
            let mut x = (**inner).clone();
            unbound_whitespace(&mut x, bound);
            if x != **inner {
                *inner = Arc::new(x);
            }
        }
        Expr::Perm(p) => {
            p.members.iter_mut().for_each(|(m, _)| unbound_whitespace(m, bound));
            if let Some(x) = p.extra.as_mut() {
                unbound_whitespace(x, bound);
            }
            unbound_whitespace(&mut p.sep, bound);
        }
        Expr::Literal(_) | Expr::Ref { .. } | Expr::Tokens(_) => {}
    }
}
