#![allow(dead_code)]
//! Shared helpers: a tiny vocabulary and byte-level acceptance.

use corral_core::{CompiledGrammar, Grammar, Matcher, Vocabulary};
use std::path::PathBuf;
use std::sync::{Arc, OnceLock};

/// A two-token vocabulary (one byte token and EOS); matching is byte-driven.
pub fn vocab() -> Arc<Vocabulary> {
    static V: OnceLock<Arc<Vocabulary>> = OnceLock::new();
    V.get_or_init(|| Arc::new(Vocabulary::new(vec![b"x".to_vec(), vec![]], vec![1], vec![], None).unwrap())).clone()
}

/// A vocabulary of every ASCII byte, `fragments`, and 2,500 random concatenations of them
/// (2–20 bytes, from `seed`), plus EOS: multi-byte tokens that cross lexeme boundaries.
pub fn fragment_vocab(fragments: &[&str], seed: u64) -> Arc<Vocabulary> {
    let mut rnd = corral_core::testutil::xorshift(seed);
    let mut toks: Vec<Vec<u8>> = (0u8..128).map(|c| vec![c]).collect();
    toks.extend(fragments.iter().map(|f| f.as_bytes().to_vec()));
    for _ in 0..2500 {
        let mut t = Vec::new();
        let len = 2 + rnd(19) as usize;
        while t.len() < len {
            t.extend_from_slice(fragments[rnd(fragments.len() as u64) as usize].as_bytes());
        }
        t.truncate(len);
        toks.push(t);
    }
    toks.push(Vec::new());
    let eos = (toks.len() - 1) as u32;
    Arc::new(Vocabulary::new(toks, vec![eos], vec![], None).unwrap())
}

/// Walks `doc` byte by byte from the start of `cg`, asserting before each byte that the mask
/// holds exactly the tokens the matcher accepts (the per-token reference), and that `doc` is
/// accepted whole; `what` names the grammar in failures.
pub fn walk_checking_masks(cg: &Arc<CompiledGrammar>, doc: &str, what: &str) {
    use corral_core::testutil::{accepted_tokens, mask_tokens};
    let mut m = Matcher::new(cg.clone());
    let bytes = doc.as_bytes();
    for i in 0..bytes.len() {
        assert_eq!(mask_tokens(&mut m), accepted_tokens(&mut m), "{what}: at byte {i} of {doc}");
        assert!(m.accept_bytes(&bytes[i..i + 1]), "{what}: byte {i} of {doc}");
    }
    assert!(m.is_accepting(), "{what}: {doc}");
}

/// Whether `text` is a complete sentence of `g`.
pub fn accepts(g: &Grammar, text: &str) -> bool {
    let cg = Arc::new(CompiledGrammar::new(g, vocab()));
    let mut m = Matcher::new(cg);
    m.accept_bytes(text.as_bytes()) && m.is_accepting()
}

/// A reusable matcher for many inputs.
pub struct Checker {
    cg: Arc<CompiledGrammar>,
}

impl Checker {
    pub fn new(g: &Grammar) -> Checker {
        Checker { cg: Arc::new(CompiledGrammar::new(g, vocab())) }
    }
    pub fn accepts(&self, text: &str) -> bool {
        let mut m = Matcher::new(self.cg.clone());
        m.accept_bytes(text.as_bytes()) && m.is_accepting()
    }
}

/// `shared/data` next to the repository, if present.
pub fn data_dir() -> Option<PathBuf> {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data");
    p.is_dir().then_some(p)
}
