//! `Expr::Token`: a regular piece kept as its own terminal. The language is unchanged, the
//! terminal is not merged with its neighbours, and equal tokens of different grammars share
//! one process-wide terminal id (so automata and mask caches are shared).

use corral_core::ebnf::{Expr, GrammarAst, RuleDef};
use corral_core::{Grammar, Limits};

fn lit(s: &str) -> Expr {
    Expr::Literal(s.as_bytes().to_vec())
}

fn grammar(key: &str, token: bool) -> Grammar {
    let body = Expr::Repeat { inner: Box::new(Expr::Alt(vec![lit("a"), lit("bc")])), min: 0, max: None };
    let value = if token { Expr::Token(Box::new(Expr::Seq(vec![lit("\""), body, lit("\"")]))) } else { Expr::Seq(vec![lit("\""), body, lit("\"")]) };
    let ast = GrammarAst { rules: vec![RuleDef { name: "root".into(), expr: Expr::Seq(vec![lit(key), lit(":"), value]), offset: 0 }], source: String::new() };
    Grammar::from_ast(&ast, "root", &format!("token-test-{key}-{token}"), &Limits::default()).unwrap()
}

fn accepts(g: &Grammar, s: &str) -> bool {
    let v = std::sync::Arc::new(corral_core::Vocabulary::new(vec![b"x".to_vec(), vec![]], vec![1], vec![], None).unwrap());
    let mut m = corral_core::Matcher::new(std::sync::Arc::new(corral_core::CompiledGrammar::new(g, v)));
    m.accept_bytes(s.as_bytes()) && m.is_accepting()
}

#[test]
fn tokens_stay_separate_and_shared() {
    let (merged, a, b) = (grammar("k1", false), grammar("k1", true), grammar("k2", true));
    assert_eq!(merged.num_terminals(), 1, "plain regular pieces merge into one terminal");
    assert_eq!(a.num_terminals(), 2, "the token is a terminal of its own");
    let gid = |g: &Grammar| g.cfg().terminals.iter().map(|t| t.gid).collect::<Vec<_>>();
    let (ga, gb) = (gid(&a), gid(&b));
    assert!(ga.iter().any(|x| gb.contains(x)), "equal tokens share their process-wide id: {ga:?} {gb:?}");
    for s in ["k1:\"\"", "k1:\"abca\"", "k1:\"b\"", "k1:\"a", "k1\"a\"", "k2:\"a\"", "k1:\"bcbc\"x"] {
        assert_eq!(accepts(&merged, s), accepts(&a, s), "{s}");
    }
}
