//! Key sets (`Expr::Perm`) against an independent expansion into plain rules: one rule per
//! (members used, count) state, whose dead states the ordinary unproductive-rule pruning
//! removes. Random key sets, random walks and random strings: masks, acceptance and
//! `is_accepting` must agree at every step.

use corral_core::ebnf::{Expr, GrammarAst, PermSpec, RuleDef};
use corral_core::{CompiledGrammar, Grammar, Limits, Matcher, Vocabulary};
use corral_core::testutil::mask_tokens;
use std::sync::Arc;

struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

fn lit(s: &str) -> Expr {
    Expr::Literal(s.as_bytes().to_vec())
}
fn rf(s: &str) -> Expr {
    Expr::Ref { name: s.into(), offset: 0 }
}
fn rule(name: &str, expr: Expr) -> RuleDef {
    RuleDef { name: name.into(), expr, offset: 0 }
}

/// Member expressions: overlapping literals, a regular class, a recursive member.
fn member_pool() -> Vec<Expr> {
    vec![
        lit("a"),
        lit("bb"),
        lit("b"),
        Expr::Seq(vec![lit("c"), Expr::Repeat { inner: Box::new(lit("d")), min: 0, max: Some(2) }]),
        Expr::Seq(vec![lit("p"), rf("paren")]),
        Expr::Alt(vec![lit("a"), lit("e")]),
        // Unproductive: a required one makes the whole key set empty.
        Expr::Seq(vec![lit("n"), rf("never")]),
    ]
}

fn never() -> RuleDef {
    rule("never", Expr::Seq(vec![lit("z"), rf("never")]))
}

fn paren() -> RuleDef {
    rule("paren", Expr::Alt(vec![lit("."), Expr::Seq(vec![lit("("), rf("paren"), lit(")")])]))
}

struct Case {
    members: Vec<(Expr, bool)>,
    extra: Option<Expr>,
    sep: Expr,
    min: u32,
    max: Option<u32>,
}

fn perm_grammar(c: &Case) -> GrammarAst {
    let spec = PermSpec { members: c.members.clone(), extra: c.extra.clone(), sep: c.sep.clone(), min: c.min, max: c.max };
    GrammarAst { rules: vec![rule("root", Expr::Seq(vec![lit("<"), Expr::Perm(Box::new(spec)), lit(">")])), paren(), never()], source: String::new() }
}

/// The same language, one rule per state, no viability reasoning: pruning does that.
fn expanded_grammar(c: &Case) -> GrammarAst {
    let n = c.members.len();
    let cap = c.max.unwrap_or(c.min.max(1));
    let name = |used: usize, count: u32| format!("s_{used}_{count}");
    let mut rules = vec![rule("root", Expr::Seq(vec![lit("<"), rf(&name(0, 0)), lit(">")])), paren(), never()];
    for used in 0..1usize << n {
        for count in 0..=cap {
            let mut alts = Vec::new();
            let req_ok = (0..n).all(|i| !c.members[i].1 || used >> i & 1 == 1);
            if req_ok && count >= c.min {
                alts.push(Expr::Seq(vec![]));
            }
            let room = c.max.is_none_or(|m| count < m);
            let lead = |e: &Expr| if count == 0 { e.clone() } else { Expr::Seq(vec![c.sep.clone(), e.clone()]) };
            let next_count = (count + 1).min(cap);
            if room {
                for i in 0..n {
                    if used >> i & 1 == 0 {
                        alts.push(Expr::Seq(vec![lead(&c.members[i].0), rf(&name(used | 1 << i, next_count))]));
                    }
                }
                if let Some(x) = &c.extra {
                    alts.push(Expr::Seq(vec![lead(x), rf(&name(used, next_count))]));
                }
            }
            // An alternative that never ends keeps the rule defined when nothing else is allowed.
            alts.push(Expr::Seq(vec![lit("!"), rf(&name(used, count))]));
            rules.push(rule(&name(used, count), Expr::Alt(alts)));
        }
    }
    GrammarAst { rules, source: String::new() }
}

fn vocab() -> Arc<Vocabulary> {
    let mut toks: Vec<Vec<u8>> = ["<", ">", "a", "b", "bb", "c", "d", "e", "p", "(", ")", ".", ",", ";", "a,", ",b", "<a", "b>", "bb,", "cd", "dd", ",p(", ".)", ")>", "<>", "x", "x,", "n", "z"]
        .iter()
        .map(|t| t.as_bytes().to_vec())
        .collect();
    toks.push(Vec::new());
    let eos = (toks.len() - 1) as u32;
    Arc::new(Vocabulary::new(toks, vec![eos], vec![], None).unwrap())
}

fn random_case(rng: &mut Rng) -> Case {
    let pool = member_pool();
    let n = 1 + rng.below(4) as usize;
    let members = (0..n).map(|_| (pool[rng.below(pool.len() as u64) as usize].clone(), rng.below(3) == 0)).collect();
    let extra = (rng.below(2) == 0).then(|| if rng.below(2) == 0 { lit("x") } else { Expr::Seq(vec![lit("x"), rf("paren")]) });
    let sep = if rng.below(3) == 0 { Expr::Alt(vec![lit(","), lit(";")]) } else { lit(",") };
    let min = rng.below(4) as u32;
    let max = (rng.below(2) == 0).then(|| rng.below(5) as u32);
    Case { members, extra, sep, min, max }
}

fn compile(ast: &GrammarAst, v: &Arc<Vocabulary>, key: &str) -> Option<Arc<CompiledGrammar>> {
    Grammar::from_ast(ast, "root", key, &Limits::default()).ok().map(|g| Arc::new(CompiledGrammar::new(&g, v.clone())))
}

#[test]
fn key_sets_match_their_expansion() {
    let v = vocab();
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut compared = 0;
    for case_no in 0..300 {
        let c = random_case(&mut rng);
        let a = compile(&perm_grammar(&c), &v, &format!("perm-test-a-{case_no}"));
        let b = compile(&expanded_grammar(&c), &v, &format!("perm-test-b-{case_no}"));
        let (a, b) = match (a, b) {
            (Some(a), Some(b)) => (a, b),
            (None, None) => continue,
            (a, b) => panic!("case {case_no}: key set compiles: {}, expansion compiles: {}", a.is_some(), b.is_some()),
        };
        compared += 1;
        for walk in 0..6 {
            let (mut ma, mut mb) = (Matcher::new(a.clone()), Matcher::new(b.clone()));
            let mut hist: Vec<u32> = Vec::new();
            for step in 0..24 {
                let (xa, xb) = (mask_tokens(&mut ma), mask_tokens(&mut mb));
                assert_eq!(xa, xb, "case {case_no} walk {walk} step {step} after {:?}\nmembers {:?}\nextra {:?} sep {:?} min {} max {:?}", hist.iter().map(|&t| String::from_utf8_lossy(v.token_bytes(t)).into_owned()).collect::<Vec<_>>(), c.members, c.extra, c.sep, c.min, c.max);
                assert_eq!(ma.is_accepting(), mb.is_accepting(), "case {case_no} walk {walk} step {step}");
                let choices: Vec<u32> = xa.iter().copied().filter(|&t| !v.is_eos(t)).collect();
                if choices.is_empty() {
                    break;
                }
                let t = choices[rng.below(choices.len() as u64) as usize];
                assert!(ma.accept_token(t).unwrap() && mb.accept_token(t).unwrap());
                hist.push(t);
                if rng.below(8) == 0 {
                    let k = 1 + rng.below(ma.num_accepted() as u64) as usize;
                    ma.rollback(k).unwrap();
                    mb.rollback(k).unwrap();
                    hist.truncate(hist.len() - k);
                }
            }
        }
        // Random strings, mostly invalid.
        let alphabet = b"<>abcdep().,;xnz";
        for _ in 0..40 {
            let len = rng.below(12) as usize;
            let mut s = vec![b'<'];
            s.extend((0..len).map(|_| alphabet[rng.below(alphabet.len() as u64) as usize]));
            if rng.below(2) == 0 {
                s.push(b'>');
            }
            let (mut ma, mut mb) = (Matcher::new(a.clone()), Matcher::new(b.clone()));
            let (ra, rb) = (ma.accept_bytes(&s), mb.accept_bytes(&s));
            assert_eq!(ra, rb, "case {case_no} string {}", String::from_utf8_lossy(&s));
            assert_eq!(ra && ma.is_accepting(), rb && mb.is_accepting(), "case {case_no} string {}", String::from_utf8_lossy(&s));
        }
    }
    assert!(compared > 150, "only {compared} cases compiled");
}

#[test]
fn wide_key_set_any_order() {
    // 100 members, each at most once, any order: beyond any subset construction.
    let names: Vec<String> = (0..100).map(|i| format!("k{i:02}")).collect();
    let members = names.iter().enumerate().map(|(i, n)| (lit(n), i % 10 == 0)).collect();
    let spec = PermSpec { members, extra: None, sep: lit(","), min: 0, max: None };
    let ast = GrammarAst { rules: vec![rule("root", Expr::Seq(vec![lit("{"), Expr::Perm(Box::new(spec)), lit("}")]))], source: String::new() };
    let g = Grammar::from_ast(&ast, "root", "perm-wide", &Limits::default()).unwrap();
    let mut toks: Vec<Vec<u8>> = names.iter().map(|n| n.as_bytes().to_vec()).collect();
    toks.extend([b"{".to_vec(), b"}".to_vec(), b",".to_vec(), Vec::new()]);
    let eos = (toks.len() - 1) as u32;
    let v = Arc::new(Vocabulary::new(toks, vec![eos], vec![], None).unwrap());
    let cg = Arc::new(CompiledGrammar::new(&g, v));
    let mut m = Matcher::new(cg.clone());
    let required: Vec<usize> = (0..100).step_by(10).collect();
    let order: Vec<usize> = (0..100).rev().filter(|i| i % 3 == 0 || i % 10 == 0).collect();
    assert!(m.accept_token(100).unwrap());
    for (j, &i) in order.iter().enumerate() {
        if j > 0 {
            assert!(m.accept_token(102).unwrap());
        }
        // A used member is never offered again.
        if j > 0 {
            let a = mask_tokens(&mut m);
            assert!(!a.contains(&(order[j - 1] as u32)));
        }
        assert!(m.accept_token(i as u32).unwrap(), "member {i}");
    }
    assert!(required.iter().all(|r| order.contains(r)));
    assert!(m.accept_token(101).unwrap());
    assert!(m.is_accepting());
    // Missing a required member: "}" is not allowed.
    let mut m = Matcher::new(cg);
    assert!(m.accept_bytes(b"{k01,k00"));
    assert!(!mask_tokens(&mut m).contains(&101));
    assert!(!m.accept_bytes(b"}"));
    assert!(!m.accept_bytes(b",k00"));
}

