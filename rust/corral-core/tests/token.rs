//! Terminal boundaries. `Expr::Token`: a regular piece kept as its own terminal (the language
//! is unchanged, the terminal is not merged with its neighbours, and equal tokens of different
//! grammars share one process-wide terminal id, so automata and mask caches are shared). And
//! a single regular piece whose automaton exceeds the limits is lowered along its structure.

use corral_core::ebnf::{Expr, GrammarAst, RuleDef};
use corral_core::{Grammar, Limits};

fn lit(s: &str) -> Expr {
    Expr::Literal(s.as_bytes().to_vec())
}

fn grammar(key: &str, token: bool) -> Grammar {
    let body = Expr::Repeat { inner: Box::new(Expr::Alt(vec![lit("a"), lit("bc")])), min: 0, max: None };
    let value = if token { Expr::Token(std::sync::Arc::new(Expr::Seq(vec![lit("\""), body, lit("\"")]))) } else { Expr::Seq(vec![lit("\""), body, lit("\"")]) };
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

#[test]
fn oversized_atomic_terminal_is_lowered_structurally() {
    // One regex terminal whose DFA needs 2^7 states: too many for a limit of 60.
    let src = "root ::= /(a|b)*a(a|b){6}/ \"!\"";
    let small = Limits { max_dfa_states: 60, ..Limits::default() };
    let g_small = Grammar::from_ebnf(src, "root", &small).unwrap();
    let g_big = Grammar::from_ebnf(src, "root", &Limits::default()).unwrap();
    assert!(g_small.num_terminals() > g_big.num_terminals());
    let mut x: u64 = 0x9e37_79b9;
    for _ in 0..400 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let len = (x % 12) as usize;
        let mut s: String = (0..len).map(|i| if x >> (i + 8) & 1 == 1 { 'a' } else { 'b' }).collect();
        s.push('!');
        assert_eq!(accepts(&g_small, &s), accepts(&g_big, &s), "{s}");
    }
    assert!(accepts(&g_small, "babbbbbb!") && !accepts(&g_small, "bbbbbbbb!"));
}

#[test]
fn oversized_regular_rule_is_lowered_structurally() {
    let src = "root ::= x x x \"!\"\nx ::= [a-c]{0,30} \"d\"";
    let small = Limits { max_nfa_states: 100, ..Limits::default() };
    let g_small = Grammar::from_ebnf(src, "root", &small).unwrap();
    let g_big = Grammar::from_ebnf(src, "root", &Limits::default()).unwrap();
    for s in ["ddd!", "abcdcdbd!", "dd!", "dddd!", "ad bd cd!", &("a".repeat(30) + "ddd!"), &("a".repeat(31) + "ddd!")] {
        assert_eq!(accepts(&g_small, s), accepts(&g_big, s), "{s}");
    }
    assert!(accepts(&g_small, "adbdcd!"));
}
