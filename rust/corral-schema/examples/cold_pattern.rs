//! Cold cache entries of string patterns with the Llama 3 vocabulary: how long one fresh
//! lexer walk takes inside a pattern's body. `cargo run --release -p corral-schema --example
//! cold_pattern -- '^[\w\s-]+$' abc` (pattern, then the body bytes before the position;
//! `CP_FORMAT=uri` to time a format's states instead of the pattern's).
use corral_core::{CiEntry, Lexer};
use corral_core::testutil::load_tiktoken;
use corral_schema::{compile_schema, Options};
use std::time::Instant;

fn main() {
    let v = load_tiktoken("../shared/data/tokenizers/llama3/tokenizer.model", 256, &[128001, 128009]).unwrap();
    let args: Vec<String> = std::env::args().collect();
    let pattern = args.get(1).cloned().unwrap_or_else(|| r"^[\w\s-]+$".into());
    let body = args.get(2).cloned().unwrap_or_else(|| "ab".into());
    // `CP_FORMAT=uri` (or any format): a string of that format instead of the pattern.
    let schema = match std::env::var("CP_FORMAT") {
        Ok(f) => serde_json::json!({"type": "string", "format": f}),
        Err(_) => serde_json::json!({"type": "string", "pattern": pattern}),
    };
    let c = compile_schema(&schema, &Options::default()).unwrap();
    let cfg = c.grammar.cfg();
    let text = format!("\"{body}");
    let live = |d: &corral_core::Dfa| text.bytes().fold(d.start(), |q, b| d.next(q, b)) != corral_core::DEAD;
    let t = cfg.terminals.iter().position(|t| live(t.dfa())).expect("a terminal takes the body");
    let dfa = cfg.terminals[t].dfa();
    let s = text.bytes().fold(dfa.start(), |q, b| dfa.next(q, b));
    let n: usize = args.get(3).and_then(|a| a.parse().ok()).unwrap_or(20);
    let mut times = Vec::new();
    for _ in 0..n {
        let t0 = Instant::now();
        let e = CiEntry::build(v.trie(), &[Lexer { dfa, state: s, gid: 0 }], v.mask_words());
        times.push(t0.elapsed().as_secs_f64() * 1e6);
        std::hint::black_box(e);
    }
    times.sort_by(|a, b| a.partial_cmp(b).unwrap());
    println!("{pattern} after {text:?}: cold entry µs min {:.0} median {:.0} ({n} runs)", times[0], times[n / 2]);
}
