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
        e @ (Expr::Literal(_) | Expr::Terminal(_)) => e,
    }
}

fn has_ref(e: &Expr) -> bool {
    match e {
        Expr::Seq(v) | Expr::Alt(v) => v.iter().any(has_ref),
        Expr::Repeat { inner, .. } => has_ref(inner),
        Expr::Ref { .. } => true,
        Expr::Token(inner) => has_ref(inner),
        Expr::Perm(p) => p.members.iter().any(|(m, _)| has_ref(m)) || p.extra.as_ref().is_some_and(has_ref) || has_ref(&p.sep),
        Expr::Literal(_) | Expr::Terminal(_) => false,
    }
}

/// The rules of JSON Schema `schema` under `prefix` (root rule `{prefix}root`), compiled with
/// `opts`; `at` says where the schema sits, for errors.
pub fn schema_rules(schema: &serde_json::Value, opts: &corral_schema::Options, prefix: &str, at: &str) -> crate::Result<(Vec<RuleDef>, String)> {
    let (ast, _warnings) = corral_schema::big_stack::on_big_stack(|| corral_schema::compile_schema_rules(schema, opts))
        .map_err(|source| crate::FormatError::Schema { at: at.to_string(), source })?;
    Ok((prefixed(ast, prefix), format!("{prefix}root")))
}
