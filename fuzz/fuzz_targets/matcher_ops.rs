//! A matcher driven by arbitrary operation sequences on a grammar taken from the input.
//! Invariants checked on every fill: a token's bit is set iff `accept_token` accepts it
//! (then rolled back) — once EOS is accepted, nothing is accepted and the mask is EOS only —
//! and rollback restores the previous mask.
#![no_main]
use corral_core::{CompiledGrammar, Grammar, Limits, Matcher, Vocabulary};
use libfuzzer_sys::fuzz_target;
use std::sync::Arc;

const GRAMMARS: &[&str] = &[
    include_str!("../../grammars/json.ebnf"),
    "root ::= x y\nx ::= \"a\"+\ny ::= \"a\" \"b\" | z\nz ::= \"(\" z \")\" | \"c\"",
    "root ::= (expr \"=\" ws term \"\\n\")+\nexpr ::= term ([-+*/] term)*\nterm ::= [a-z] [a-z0-9_]* ws | [0-9]+ ws | \"(\" ws expr \")\" ws\nws ::= [ \\t]*",
    "root ::= \"é\"* [^\"]{0,3} \"😀\" | root \"!\"",
];

fn vocab() -> Arc<Vocabulary> {
    let toks: Vec<&[u8]> = vec![
        b"{", b"}", b"[", b"]", b"\"", b",", b":", b" ", b"a", b"ab", b"aa", b"b", b"(", b")", b"c", b"1", b"12", b"=", b"+", b"\n", b"x",
        b"\xc3", b"\xa9", "é".as_bytes(), "😀".as_bytes(), b"\xf0\x9f", b"!", b"true", b"nul", b"l", b"\\", b"u", b"-", b".", b"e",
    ];
    let mut t: Vec<Vec<u8>> = toks.into_iter().map(|x| x.to_vec()).collect();
    t.push(Vec::new());
    let eos = (t.len() - 1) as u32;
    Arc::new(Vocabulary::new(t, vec![eos], vec![], Some(64)).unwrap())
}

fn mask_of(m: &mut Matcher, words: usize) -> Vec<u32> {
    let mut mask = vec![0u32; words];
    m.fill_next_token_bitmask(&mut mask).unwrap();
    mask
}

fuzz_target!(|data: &[u8]| {
    if data.is_empty() {
        return;
    }
    let g = match Grammar::from_ebnf(GRAMMARS[data[0] as usize % GRAMMARS.len()], "root", &Limits::default()) {
        Ok(g) => g,
        Err(_) => return,
    };
    let v = vocab();
    let words = v.mask_words();
    let cg = Arc::new(CompiledGrammar::new(&g, v.clone()));
    let mut m = Matcher::new(cg);
    for chunk in data[1..].chunks(2) {
        let (op, arg) = (chunk[0] % 6, *chunk.get(1).unwrap_or(&0) as u32);
        match op {
            0 | 1 => {
                let mask = mask_of(&mut m, words);
                let terminated = m.is_terminated();
                for t in 0..v.size() as u32 {
                    let bit = mask[t as usize / 32] >> (t % 32) & 1 == 1;
                    let ok = m.accept_token(t).unwrap();
                    if terminated {
                        // By design (tests/test_matcher.py): a terminated matcher accepts nothing,
                        // and its mask is EOS only so batched generation can pad with EOS.
                        assert!(!ok, "terminated matcher accepted token {t}");
                        assert_eq!(bit, v.is_eos(t), "terminated matcher's mask is not EOS-only at token {t}");
                        continue;
                    }
                    assert_eq!(bit, ok, "mask bit and accept_token disagree on token {t}");
                    if ok {
                        m.rollback(1).unwrap();
                    }
                }
                let t = arg % v.size() as u32;
                let _ = m.accept_token(t).unwrap();
            }
            2 => {
                let before = mask_of(&mut m, words);
                if m.accept_token(arg % v.size() as u32).unwrap() {
                    m.rollback(1).unwrap();
                }
                assert_eq!(before, mask_of(&mut m, words), "rollback changed the mask");
            }
            3 => {
                let n = (arg as usize) % (m.num_accepted() + 1);
                m.rollback(n).unwrap();
            }
            4 => {
                let f = m.forced_bytes();
                if !f.is_empty() {
                    assert!(m.accept_bytes(&f), "forced bytes must be acceptable");
                }
            }
            _ => {
                let ids: Vec<u32> = data.iter().take(8).map(|&b| b as u32 % v.size() as u32).collect();
                let before = mask_of(&mut m, words);
                let n = m.validate_tokens(&ids).unwrap();
                assert!(n <= ids.len());
                assert_eq!(before, mask_of(&mut m, words), "validate_tokens changed the state");
            }
        }
    }
});
