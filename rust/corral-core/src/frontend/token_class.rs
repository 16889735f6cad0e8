//! Token classes: grammar symbols matched by token id rather than by text.
//!
//! Text grammars constrain bytes, so a special token (`<|eot_id|>`, `[TOOL_CALLS]`), which
//! stands for no text, is never allowed by them. A grammar may name tokens instead
//! (structural tags' `token` formats, Lark's `<|name|>` and `<[id]>`): such a symbol is one
//! terminal of the grammar, started only at a position where a lexeme may end and completed
//! by exactly one token whose id is in its class. Its text, if it has any, plays no part:
//! the same text spelled by other tokens goes through the grammar's text symbols only.
//!
//! Names are resolved against the vocabulary when the grammar is paired with one
//! (`TokenClass::resolve`, in [`crate::vocab::vocab`]): a name is first looked up among the tokenizer's added and
//! special tokens ([`crate::Vocabulary::with_token_names`]), then among the tokens whose bytes
//! are exactly the name.


/// One token, by id or by its name in the tokenizer.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum TokenRef {
    /// A token id.
    Id(u32),
    /// Inclusive id range (llguidance's `<[a-b]>`).
    Range(u32, u32),
    /// A token's name: an added or special token's content, or a token's exact text.
    Name(String),
}

impl std::fmt::Display for TokenRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TokenRef::Id(i) => write!(f, "<[{i}]>"),
            TokenRef::Range(a, b) => write!(f, "<[{a}-{b}]>"),
            TokenRef::Name(n) => write!(f, "{n}"),
        }
    }
}

/// A set of tokens one grammar symbol matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum TokenClass {
    /// Exactly one of these tokens.
    OneOf(Vec<TokenRef>),
    /// Any one token of the tokenizer except these, the EOS tokens and the padding ids past
    /// the tokenizer (EOS is governed by whether the grammar may end).
    AllBut(Vec<TokenRef>),
}

impl TokenClass {
    /// A label for messages and diagnostics.
    pub fn label(&self) -> String {
        let list = |v: &[TokenRef]| v.iter().map(|t| t.to_string()).collect::<Vec<_>>().join(" ");
        match self {
            TokenClass::OneOf(v) => list(v),
            TokenClass::AllBut(v) if v.is_empty() => "any token".into(),
            TokenClass::AllBut(v) => format!("any token but {}", list(v)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::vocab::vocab::Vocabulary;

    fn vocab() -> Vocabulary {
        let toks: Vec<Vec<u8>> = vec![b"a".to_vec(), b"b".to_vec(), vec![], vec![], b"<x>".to_vec()];
        Vocabulary::new(toks, vec![2], vec![3], Some(40)).unwrap().with_token_names(vec![("<|end|>".into(), 3)])
    }

    fn ids(bits: &[u32]) -> Vec<u32> {
        (0..bits.len() as u32 * 32).filter(|&i| bits[i as usize / 32] >> (i % 32) & 1 == 1).collect()
    }

    #[test]
    fn resolves_names_ids_and_complements() {
        let v = vocab();
        let one = TokenClass::OneOf(vec![TokenRef::Name("<|end|>".into()), TokenRef::Name("<x>".into()), TokenRef::Id(0)]);
        assert_eq!(ids(&one.resolve(&v).unwrap()), vec![0, 3, 4]);
        // EOS (2) and the padding past the 5 tokens stay out of a complement.
        let but = TokenClass::AllBut(vec![TokenRef::Range(0, 0)]);
        assert_eq!(ids(&but.resolve(&v).unwrap()), vec![1, 3, 4]);
    }

    #[test]
    fn unknown_names_and_ids_are_errors() {
        let v = vocab();
        let e = TokenClass::OneOf(vec![TokenRef::Name("<|nope|>".into())]).resolve(&v).unwrap_err();
        assert!(e.to_string().contains("<|nope|>"), "{e}");
        let e = TokenClass::OneOf(vec![TokenRef::Id(5)]).resolve(&v).unwrap_err();
        assert!(e.to_string().contains("<[5]>"), "{e}");
    }
}
