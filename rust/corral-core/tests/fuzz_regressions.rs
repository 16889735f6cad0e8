//! Reproducers found by the cargo-fuzz targets in fuzz/ (see fuzz/CAMPAIGN.md), minimised with
//! `cargo fuzz tmin`. Each test replays the operations the fuzz target performed.

use corral_core::{CompiledGrammar, Grammar, Limits, Matcher, Vocabulary};
use std::sync::Arc;

/// The vocabulary of fuzz/fuzz_targets/matcher_ops.rs (35 tokens, EOS = 35, logits width 64).
fn matcher_ops_vocab() -> Arc<Vocabulary> {
    let toks: Vec<&[u8]> = vec![
        b"{", b"}", b"[", b"]", b"\"", b",", b":", b" ", b"a", b"ab", b"aa", b"b", b"(", b")", b"c", b"1", b"12", b"=", b"+", b"\n", b"x",
        b"\xc3", b"\xa9", "é".as_bytes(), "😀".as_bytes(), b"\xf0\x9f", b"!", b"true", b"nul", b"l", b"\\", b"u", b"-", b".", b"e",
    ];
    let mut t: Vec<Vec<u8>> = toks.into_iter().map(|x| x.to_vec()).collect();
    t.push(Vec::new());
    let eos = (t.len() - 1) as u32;
    Arc::new(Vocabulary::new(t, vec![eos], vec![], Some(64)).unwrap())
}

fn mask(m: &mut Matcher) -> Vec<u32> {
    let mut mask = vec![0u32; m.compiled().vocab().mask_words()];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    mask
}

/// One mask, then every token's bit against `accept_token` (accepted tokens are rolled back),
/// as the fuzz target's ops 0/1 do; returns the first disagreement (token, bit, accepted).
fn check_mask(m: &mut Matcher) -> Option<(u32, bool, bool)> {
    let n = m.compiled().vocab().size() as u32;
    let mask = mask(m);
    for t in 0..n {
        let bit = mask[t as usize / 32] >> (t % 32) & 1 == 1;
        let ok = m.accept_token(t).unwrap();
        if ok {
            m.rollback(1).unwrap();
        }
        if bit != ok {
            return Some((t, bit, ok));
        }
    }
    None
}

/// matcher_ops crash `(I\x8f\x00#I` (minimised; campaign of 2026-11-29): JSON grammar,
/// accept "1", probe every token, accept EOS, probe every token again. The fuzz target asserted
/// "mask bit iff accept_token" on the terminated matcher too, but by design (test_matcher.py,
/// docs/vllm.md) a terminated matcher accepts nothing while its mask is EOS only (so batched
/// generation can pad with EOS): the target was wrong, not the matcher. This pins the contract
/// the target now checks.
#[test]
fn matcher_ops_terminated_matcher_mask_is_eos_only() {
    let g = Grammar::from_ebnf(include_str!("../../../grammars/json.ebnf"), "root", &Limits::default()).unwrap();
    let v = matcher_ops_vocab();
    let mut m = Matcher::new(Arc::new(CompiledGrammar::new(&g, v.clone())));
    assert_eq!(check_mask(&mut m), None);
    assert!(m.accept_token(15).unwrap(), "\"1\" starts a JSON value");
    assert_eq!(check_mask(&mut m), None, "(token, mask bit, accept_token) disagree");
    assert!(m.accept_token(35).unwrap(), "EOS after \"1\"");
    assert!(m.is_terminated());
    let mask = mask(&mut m);
    for t in 0..v.size() as u32 {
        assert_eq!(mask[t as usize / 32] >> (t % 32) & 1 == 1, v.is_eos(t), "terminated mask at token {t}");
        assert!(!m.accept_token(t).unwrap(), "terminated matcher accepted token {t}");
    }
    m.rollback(1).unwrap();
    assert!(!m.is_terminated() && m.is_accepting());
    assert_eq!(check_mask(&mut m), None, "after rolling back EOS");
}
