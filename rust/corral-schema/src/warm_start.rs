//! A first request as fast as the ones after it: one small schema compiled and walked on the
//! background thread ([`corral_core::warmup`]) when a host loads its vocabulary.
//!
//! A process's first schema compile and first fills ran the compiler and the mask code cold:
//! their code pages faulted in, the process-wide caches (string and number automata, the
//! vocabulary's token-set cache) empty. The warm-up does that first compile and a walk
//! through a JSON text with the common value kinds (integer, number, boolean, null, strings
//! free and bounded, a `date`, an enum, an array and a nested object) off the caller's thread,
//! at idle priority, seconds before a serving process sees its first request: in the
//! benchmark the first schema's compile went from 0.62–0.67 to 0.44–0.46 ms (session 28,
//! `benches/README.md`). It cannot warm the caller's CPU caches (it runs on another CPU):
//! a thread's first compile on a CPU that has not run the compiler still costs 0.1–0.2 ms
//! more. (The first fill's other one-time cost, numpy's C API, the extension resolves at
//! import.) Nothing is done without a background thread.

use crate::{big_stack, compile, Options};
use corral_core::{CompiledGrammar, Matcher, Vocabulary};
use std::sync::Arc;

/// The schema compiled by the warm-up: the value kinds and keywords most schemas use.
pub const WARM_SCHEMA: &str = r#"{"type":"object","properties":{"id":{"type":"integer","minimum":0},"name":{"type":"string","maxLength":16},"score":{"type":"number"},"ok":{"type":"boolean"},"tags":{"type":"array","items":{"type":"string"}},"kind":{"enum":["alpha","beta"]},"when":{"type":"string","format":"date"},"inner":{"type":"object","properties":{"x":{"type":["string","null"]},"n":{"type":"array","items":{"type":"integer"},"maxItems":4}},"required":["x"],"additionalProperties":false}},"required":["id","name"],"additionalProperties":false}"#;

/// A text of [`WARM_SCHEMA`] walked by the warm-up (a mask filled before every 3 bytes).
pub const WARM_INSTANCE: &str = r#"{"id": 12, "name": "warm \u00e9 up", "score": -1.5e3, "ok": true, "tags": ["a", "b c"], "kind": "beta", "when": "2024-01-31", "inner": {"x": null, "n": [1, 20]}}"#;

/// Once per process, queues the warm-up on the background thread with `vocab`'s tokens (the
/// first vocabulary a host loads; the code and process-wide caches it warms serve every
/// vocabulary).
pub fn compiler_in_background(vocab: Arc<Vocabulary>) {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        corral_core::warmup::in_background(move || {
            let _ = walk(&vocab);
        });
    });
}

/// Compiles [`WARM_SCHEMA`] against `vocab` and walks [`WARM_INSTANCE`], filling a mask
/// before every three bytes; the number of masks filled (0 when something failed, which only a
/// test would notice).
pub fn walk(vocab: &Arc<Vocabulary>) -> usize {
    let Ok(schema) = serde_json::from_str::<serde_json::Value>(WARM_SCHEMA) else { return 0 };
    let Ok(compiled) = big_stack::on_big_stack(|| compile::compile(&schema, &Options::default())) else { return 0 };
    let g = CompiledGrammar::prepared(&compiled.grammar, vocab.clone());
    let mut m = Matcher::new(g);
    let mut mask = vec![0u32; vocab.mask_words()];
    let mut filled = 0;
    for chunk in WARM_INSTANCE.as_bytes().chunks(3) {
        if m.fill_next_token_bitmask(&mut mask).is_err() || !m.accept_bytes(chunk) {
            return 0;
        }
        filled += 1;
    }
    if m.fill_next_token_bitmask(&mut mask).is_err() || !m.is_accepting() {
        return 0;
    }
    filled + 1
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The warm-up's schema compiles and its text walks to the end: a warm-up that failed
    /// early would warm nothing, silently.
    #[test]
    fn the_warm_up_walks_its_whole_text() {
        // Every ASCII byte (the text is ASCII) and EOS.
        let mut toks: Vec<Vec<u8>> = (0u8..128).map(|c| vec![c]).collect();
        toks.push(Vec::new());
        let v = Arc::new(Vocabulary::new(toks, vec![128], vec![], None).unwrap());
        let n = walk(&v);
        assert_eq!(n, WARM_INSTANCE.len().div_ceil(3) + 1, "every chunk accepted and the end reached");
    }
}
