//! Criterion benches for the hot paths, so a regression shows without the whole comparison
//! harness: token-trie walk (cold cache entry), warm mask fills at typical JSON positions, the
//! byte step, cold entries inside pattern bodies (subtree skips, the plain slice with
//! exceptions), and the logits masking kernel. Uses the Llama 3 vocabulary from `../shared/data`
//! (falls back to a synthetic 128k vocabulary when the data is absent).

use corral_core::{CiEntry, Lexer};
use corral_core::{mask_rows, NEG_INF_F32};
use corral_core::{testutil::load_tiktoken, CompiledGrammar, Grammar, Limits, Matcher, Vocabulary};
use criterion::{black_box, criterion_group, criterion_main, Criterion};
use std::sync::Arc;

fn vocab() -> Arc<Vocabulary> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../../shared/data/tokenizers/llama3/tokenizer.model");
    if let Ok(v) = load_tiktoken(path, 256, &[128001, 128009]) {
        return Arc::new(v);
    }
    // Synthetic: every 1-3 byte string over a 50-letter alphabet (~127k tokens).
    let alpha: Vec<u8> = b" \"{}[],:abcdefghijklmnopqrstuvwxyz0123456789.-\\\ntru".to_vec();
    let mut toks = Vec::new();
    for &a in &alpha {
        toks.push(vec![a]);
        for &b in &alpha {
            toks.push(vec![a, b]);
            for &c in &alpha {
                toks.push(vec![a, b, c]);
            }
        }
    }
    toks.push(Vec::new());
    let eos = (toks.len() - 1) as u32;
    Arc::new(Vocabulary::new(toks, vec![eos], vec![], None).unwrap())
}

fn benches(c: &mut Criterion) {
    let v = vocab();
    let g = Grammar::from_ebnf(include_str!("../../../grammars/json.ebnf"), "root", &Limits::default()).unwrap();
    let cg = Arc::new(CompiledGrammar::new(&g, v.clone()));
    let mut mask = vec![0u32; v.mask_words()];
    for (name, prefix) in [("fill/value_position", "{\"ab\": "), ("fill/in_string", "{\"ab\": \"x"), ("fill/after_string", "{\"ab\": \"x\""), ("fill/in_number", "[12")] {
        let mut m = Matcher::new(cg.clone());
        assert!(m.accept_bytes(prefix.as_bytes()));
        m.fill_next_token_bitmask(&mut mask).unwrap();
        c.bench_function(name, |b| b.iter(|| m.fill_next_token_bitmask(black_box(&mut mask)).unwrap()));
    }
    // Cold: the lexer-only trie walk that builds a cache entry (inside a JSON string).
    let cfg = g.cfg();
    let t = cfg.terminals.iter().position(|t| t.dfa().matches(b"\"a\"")).expect("the JSON string terminal");
    let dfa = cfg.terminals[t].dfa();
    let s = dfa.next(dfa.start(), b'"');
    if s != corral_core::DEAD {
        c.bench_function("trie_walk/cold_entry", |b| b.iter(|| black_box(CiEntry::build(v.trie(), &[Lexer { dfa, state: s, gid: 0 }], v.mask_words()))));
    }
    // Cold entries inside pattern bodies no whole plain slice serves: a class whose subtrees
    // the walk takes at once (every byte below loops back), and `.` without line terminators
    // (the plain slice with exceptions: only subtrees holding the last byte of U+2028/U+2029
    // or the hub's first byte E2 are walked).
    let dot = r#"([^"\\\x00-\x1f\x{2028}\x{2029}]|\\["\\/bfrt]|\\u[0-9a-fA-F]{4})"#;
    for (name, pattern, prefix) in [("trie_walk/cold_pattern_subtree_skip", r#"[A-Za-z0-9_.:-]+""#.to_string(), "ab"), ("trie_walk/cold_pattern_excepted", format!("https://{dot}+\""), "https://ab")] {
        let rx = corral_core::parse_regex(&pattern, &Limits::default()).unwrap();
        let dfa = corral_core::Dfa::from_rx(&rx, &Limits::default()).unwrap();
        let s = prefix.bytes().fold(dfa.start(), |q, b| dfa.next(q, b));
        assert_ne!(s, corral_core::DEAD, "{pattern} after {prefix}");
        c.bench_function(name, |b| b.iter(|| black_box(CiEntry::build(v.trie(), &[Lexer { dfa: &dfa, state: s, gid: 0 }], v.mask_words()))));
    }
    // Byte steps: accepting a 200-byte JSON document byte by byte.
    let doc = br#"{"name": "corral", "tags": ["fast", "exact"], "n": [1, 2.5e3, -7], "ok": true, "nested": {"a": null, "b": "\u00e9\n"}}"#;
    c.bench_function("accept/json_doc_bytes", |b| {
        b.iter(|| {
            let mut m = Matcher::new(cg.clone());
            for i in 0..doc.len() {
                m.accept_bytes(&doc[i..i + 1]);
            }
            black_box(m.is_accepting())
        })
    });
    // Logits masking kernel, V = vocab size, sparse mask (value position).
    let mut m = Matcher::new(cg.clone());
    m.accept_bytes(b"{\"ab\": ");
    m.fill_next_token_bitmask(&mut mask).unwrap();
    let width = v.size();
    let mut logits = vec![0x3f80_0000u32; width];
    c.bench_function("apply_mask/f32_batch1_sparse", |b| b.iter(|| black_box(mask_rows(&mut logits, width, &mask, mask.len(), &[0], width, NEG_INF_F32))));
}

criterion_group! {
    name = inner;
    config = Criterion::default().sample_size(30).measurement_time(std::time::Duration::from_secs(2)).warm_up_time(std::time::Duration::from_millis(500));
    targets = benches
}
criterion_main!(inner);
