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
