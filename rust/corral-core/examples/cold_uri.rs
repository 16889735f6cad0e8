//! Cold cache entries for string states that are not plain-text safe, with the Llama 3
//! vocabulary: URI characters (about 48k tokens allowed) and a key that must not contain
//! `after_` (nearly every plain token allowed; no slice applies). Best of 5 whole walks each.
//! `cargo run --release --example cold_uri` (`RAYON_NUM_THREADS=1` for one thread).
use corral_core::{CiEntry, Lexer};
use corral_core::{testutil::load_tiktoken, Grammar, Limits};
use std::time::Instant;

fn main() {
    let v = load_tiktoken("../shared/data/tokenizers/llama3/tokenizer.model", 256, &[128001, 128009]).unwrap();
    let cases = [
        ("uri characters", "root ::= \"\\\"\" [A-Za-z0-9._~:/?#@!$&'()*+,;=%-]* \"\\\"\""),
        ("no 'after_'", "root ::= \"\\\"\" ([^\"a] | \"a\" [^\"f] | \"af\" [^\"t] | \"aft\" [^\"e] | \"afte\" [^\"r] | \"after\" [^\"_])* \"\\\"\""),
    ];
    for (name, src) in cases {
        let g = Grammar::from_ebnf(src, "root", &Limits::default()).unwrap();
        let cfg = g.cfg();
        let t = &cfg.terminals[0];
        let dfa = t.dfa();
        let s = dfa.next(dfa.start(), b'"');
        let mut best = std::time::Duration::MAX;
        let mut n_allowed = 0;
        for _ in 0..5 {
            let t0 = Instant::now();
            let e = CiEntry::build(v.trie(), &[Lexer { dfa, state: s, gid: t.gid }], v.mask_words());
            best = best.min(t0.elapsed());
            n_allowed = e.allowed.to_bits(v.mask_words()).iter().map(|w| w.count_ones()).sum::<u32>();
        }
        println!("{name}: cold entry best of 5: {best:?}, {n_allowed} tokens, {} DFA states", dfa.num_states());
    }
}
