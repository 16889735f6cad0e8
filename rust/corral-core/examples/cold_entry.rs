//! Builds one cold cache entry (inside a JSON string) with the Llama 3 vocabulary: the
//! worst single fill latency. `cargo run --release --example cold_entry`.
use corral_core::{CiEntry, Lexer};
use corral_core::{testutil::load_tiktoken, Grammar, Limits};
use std::time::Instant;

fn main() {
    let v = load_tiktoken("../shared/data/tokenizers/llama3/tokenizer.model", 256, &[128001, 128009]).unwrap();
    println!("trie nodes: {}", v.trie().nodes.len());
    let g = Grammar::from_ebnf(include_str!("../../../grammars/json.ebnf"), "root", &Limits::default()).unwrap();
    let cfg = g.cfg();
    let t = cfg.terminals.iter().position(|t| t.dfa().matches(b"\"a\"")).unwrap();
    let dfa = cfg.terminals[t].dfa();
    let s = dfa.next(dfa.start(), b'"');
    let n: usize = std::env::args().nth(1).and_then(|a| a.parse().ok()).unwrap_or(5);
    let mut best = std::time::Duration::MAX;
    for _ in 0..n {
        let t0 = Instant::now();
        let e = CiEntry::build(v.trie(), &[Lexer { dfa, state: s, gid: 0 }], v.mask_words());
        best = best.min(t0.elapsed());
        std::hint::black_box(e);
    }
    println!("cold entry (in string): best of {n}: {best:?}");
}
