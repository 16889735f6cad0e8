//! Reads `{"schema": ..., "data": ..., "strict": bool}` on stdin; prints whether the compiled
//! grammar accepts the compact serialization of `data`.
use corral_core::{CompiledGrammar, Matcher, Vocabulary};
use corral_schema::{compile_schema, Options};
use std::sync::Arc;

fn main() {
    let v: serde_json::Value = serde_json::from_reader(std::io::stdin()).unwrap();
    let opts = Options { strict: v["strict"].as_bool().unwrap_or(true), ..Default::default() };
    let c = match compile_schema(&v["schema"], &opts) {
        Ok(c) => c,
        Err(e) => return println!("error: {e}"),
    };
    let vocab = Arc::new(Vocabulary::new(vec![b"x".to_vec(), vec![]], vec![1], vec![], None).unwrap());
    let mut m = Matcher::new(Arc::new(CompiledGrammar::new(&c.grammar, vocab)));
    let text = serde_json::to_string(&v["data"]).unwrap();
    let mut n = 0;
    for (i, b) in text.bytes().enumerate() {
        if !m.accept_bytes(&[b]) {
            return println!("rejected at byte {i}: {}", &text[..i.min(text.len())].chars().rev().take(60).collect::<String>().chars().rev().collect::<String>());
        }
        n = i;
    }
    println!("prefix ok ({n}); accepting: {}; warnings: {:?}", m.is_accepting(), c.warnings);
}
