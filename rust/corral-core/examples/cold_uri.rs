//! Cold cache entry for a state that is not plain-text safe (URI characters inside a string).
use corral_core::ci_cache::{CiEntry, Lexer};
use corral_core::{testutil::load_tiktoken, Grammar, Limits};
use std::time::Instant;

fn main() {
    let v = load_tiktoken("../shared/data/tokenizers/llama3/tokenizer.model", 256, &[128001, 128009]).unwrap();
    let g = Grammar::from_ebnf("root ::= \"\\\"\" [A-Za-z0-9._~:/?#@!$&'()*+,;=%-]* \"\\\"\"", "root", &Limits::default()).unwrap();
    let cfg = g.cfg();
    for (ti, t) in cfg.terminals.iter().enumerate() {
        let dfa = &t.dfa;
        let s = dfa.next(dfa.start(), b'"');
        if s == corral_core::dfa::DEAD { continue; }
        let mut best = std::time::Duration::MAX;
        let mut n_allowed = 0;
        for _ in 0..5 {
            let t0 = Instant::now();
            let e = CiEntry::build(v.trie(), &[Lexer { dfa, state: s, gid: ti as u32 }], v.mask_words());
            best = best.min(t0.elapsed());
            n_allowed = e.allowed.to_bits(v.mask_words()).iter().map(|w| w.count_ones()).sum::<u32>();
        }
        println!("terminal {ti}: cold entry best of 5: {best:?}, {n_allowed} tokens");
    }
}
