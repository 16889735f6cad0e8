//! Times mask fills for json.ebnf with the Llama 3 vocabulary at a set of JSON prefixes.
//! Usage: cargo run --release --example json_masks [-- ITER]

use corral_core::{testutil::load_tiktoken, CompiledGrammar, Grammar, Limits, Matcher};
use std::sync::Arc;
use std::time::Instant;

fn main() {
    let iters: usize = std::env::args().nth(1).and_then(|s| s.parse().ok()).unwrap_or(2000);
    let t = Instant::now();
    let v = Arc::new(load_tiktoken("../shared/data/tokenizers/llama3/tokenizer.model", 256, &[128001, 128009]).unwrap());
    println!("vocab {:?}", t.elapsed());
    let g = Grammar::from_ebnf(include_str!("../../../grammars/json.ebnf"), "root", &Limits::default()).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, v.clone()));
    let mut mask = vec![0u32; v.mask_words()];
    let src = vec![7u32; v.mask_words()];
    let t = Instant::now();
    for _ in 0..iters {
        mask.copy_from_slice(std::hint::black_box(&src));
        std::hint::black_box(&mut mask);
    }
    println!("baseline 16KB copy: {:?}", t.elapsed() / iters as u32);
    let all = ["", "{", "{\"", "{\"ab\": ", "{\"ab\": \"x", "{\"ab\": \"x\"", "{\"ab\": 12", "{\"ab\": [1, ", "{\"ab\": true"];
    let only = std::env::var("PREFIX").ok();
    for prefix in all.iter().copied().filter(|p| only.as_deref().map_or(true, |o| o == *p)) {
        let mut m = Matcher::new(cg.clone());
        assert!(m.accept_bytes(prefix.as_bytes()));
        m.fill_next_token_bitmask(&mut mask).unwrap();
        let t = Instant::now();
        for _ in 0..iters {
            m.fill_next_token_bitmask(&mut mask).unwrap();
        }
        let per = t.elapsed() / iters as u32;
        let n: u32 = mask.iter().map(|w| w.count_ones()).sum();
        println!("{:>16} {:>10.1?}  allowed={n}", format!("{prefix:?}"), per);
    }
}
