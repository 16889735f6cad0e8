//! Terminals matched by token id (`Expr::Tokens`): special tokens allowed exactly where a
//! grammar names them, text tokens named by id beside the same text spelled by other tokens,
//! and "any token but" classes. Every mask is checked against per-token acceptance.

use corral_core::ebnf::{Expr, GrammarAst, RuleDef};
use corral_core::testutil::{accepted_tokens, mask_tokens, xorshift};
use corral_core::{TokenClass, TokenRef};
use corral_core::{CompiledGrammar, Grammar, Limits, Matcher, Vocabulary};
use std::sync::Arc;

const A: u32 = 0;
const B: u32 = 1;
const AB: u32 = 2;
const T: u32 = 3; // "<t>"
const LT: u32 = 4; // "<"
const TGT: u32 = 5; // "t>"
const CALL: u32 = 6; // special "<|call|>"
const END: u32 = 7; // special "<|end|>"
const EOS: u32 = 8;

fn vocab() -> Arc<Vocabulary> {
    let toks: Vec<Vec<u8>> = ["a", "b", "ab", "<t>", "<", "t>", "", "", ""].iter().map(|s| s.as_bytes().to_vec()).collect();
    let v = Vocabulary::new(toks, vec![EOS], vec![CALL, END], Some(40)).unwrap();
    Arc::new(v.with_token_names(vec![("<|call|>".into(), CALL), ("<|end|>".into(), END)]))
}

fn lit(s: &str) -> Expr {
    Expr::Literal(s.as_bytes().to_vec())
}

fn star(e: Expr) -> Expr {
    Expr::Repeat { inner: Box::new(e), min: 0, max: None }
}

fn tok(c: TokenClass) -> Expr {
    Expr::Tokens(Arc::new(c))
}

fn name(n: &str) -> TokenClass {
    TokenClass::OneOf(vec![TokenRef::Name(n.into())])
}

fn matcher(root: Expr, key: &str) -> Matcher {
    let ast = GrammarAst { rules: vec![RuleDef { name: "root".into(), expr: root, offset: 0 }], source: String::new() };
    let g = Grammar::from_ast(&ast, "root", key, &Limits::default()).unwrap();
    CompiledGrammar::check_tokens(&g, &vocab()).unwrap();
    Matcher::new(Arc::new(CompiledGrammar::new(&g, vocab())))
}

/// Walks `steps` random allowed tokens (several walks), checking each mask against
/// per-token acceptance.
fn check_walks(m: &mut Matcher, walks: usize, steps: usize) {
    let mut rnd = xorshift(0x5eed);
    for _ in 0..walks {
        m.reset();
        for _ in 0..steps {
            if m.is_terminated() {
                break;
            }
            let got = mask_tokens(m);
            assert_eq!(got, accepted_tokens(m), "after {:?}", m.last_tokens(m.num_accepted()));
            if got.is_empty() {
                break;
            }
            let id = got[rnd(got.len() as u64) as usize];
            assert!(m.accept_token(id).unwrap());
        }
    }
}

#[test]
fn special_tokens_only_where_named() {
    // root ::= "a"* <|call|> "b"+ <|end|>?
    let root = Expr::Seq(vec![star(lit("a")), tok(name("<|call|>")), Expr::Repeat { inner: Box::new(lit("b")), min: 1, max: None }, Expr::Repeat { inner: Box::new(tok(name("<|end|>"))), min: 0, max: Some(1) }]);
    let mut m = matcher(root, "tc-special");
    assert_eq!(mask_tokens(&mut m), vec![A, CALL]);
    assert!(m.accept_token(A).unwrap());
    assert!(!m.accept_token(END).unwrap(), "a special token the grammar does not expect here");
    assert!(m.accept_token(CALL).unwrap());
    assert_eq!(mask_tokens(&mut m), vec![B]);
    assert!(!m.is_accepting());
    assert!(m.accept_token(B).unwrap());
    assert_eq!(mask_tokens(&mut m), vec![B, END, EOS]);
    assert!(m.accept_token(END).unwrap());
    assert_eq!(mask_tokens(&mut m), vec![EOS]);
    assert!(m.accept_token(EOS).unwrap());
    m.rollback(3).unwrap();
    assert_eq!(mask_tokens(&mut m), vec![B]);
    check_walks(&mut m, 20, 8);
}

#[test]
fn a_named_text_token_and_its_spelling_both_count() {
    // root ::= ( "<t>" "a" | TOKEN(<t>) "b" ) "a"*  — token 3 may be text or the named token.
    let root = Expr::Seq(vec![Expr::Alt(vec![Expr::Seq(vec![lit("<t>"), lit("a")]), Expr::Seq(vec![tok(name("<t>")), lit("b")])]), star(lit("a"))]);
    let mut m = matcher(root, "tc-text");
    assert_eq!(mask_tokens(&mut m), vec![T, LT]);
    assert!(m.accept_token(T).unwrap());
    // Both readings stay open: "a" for the text, "b" for the token.
    assert_eq!(mask_tokens(&mut m), vec![A, B]);
    m.reset();
    assert!(m.accept_token(LT).unwrap());
    assert!(m.accept_token(TGT).unwrap());
    assert_eq!(mask_tokens(&mut m), vec![A], "spelled by other tokens it is text only");
    check_walks(&mut m, 30, 6);
}

#[test]
fn any_token_but() {
    // root ::= ANY-BUT(<|end|>)* <|end|>
    let root = Expr::Seq(vec![star(tok(TokenClass::AllBut(vec![TokenRef::Name("<|end|>".into())]))), tok(name("<|end|>"))]);
    let mut m = matcher(root, "tc-allbut");
    assert_eq!(mask_tokens(&mut m), vec![A, B, AB, T, LT, TGT, CALL, END]);
    for id in [CALL, AB, LT] {
        assert!(m.accept_token(id).unwrap());
    }
    assert!(!m.is_accepting());
    assert!(m.accept_token(END).unwrap());
    assert_eq!(mask_tokens(&mut m), vec![EOS]);
    check_walks(&mut m, 20, 10);
}

#[test]
fn ids_and_ranges_and_unknown_names() {
    let root = Expr::Seq(vec![tok(TokenClass::OneOf(vec![TokenRef::Id(A), TokenRef::Range(CALL, END)])), lit("b")]);
    let mut m = matcher(root, "tc-ids");
    assert_eq!(mask_tokens(&mut m), vec![A, CALL, END], "by id only: not \"ab\"");
    check_walks(&mut m, 10, 4);
    let ast = GrammarAst { rules: vec![RuleDef { name: "root".into(), expr: tok(name("<|nope|>")), offset: 0 }], source: String::new() };
    let g = Grammar::from_ast(&ast, "root", "tc-unknown", &Limits::default()).unwrap();
    let e = CompiledGrammar::check_tokens(&g, &vocab()).unwrap_err();
    assert!(e.to_string().contains("<|nope|>"), "{e}");
}
