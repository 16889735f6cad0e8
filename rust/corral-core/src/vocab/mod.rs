//! Vocabulary: a tokenizer's tokens as bytes, their trie, the plain-text slice of it, and the
//! token sets per lexer state that the vocabulary caches for every grammar.

pub(crate) mod ci_cache;
pub(crate) mod slice;
pub(crate) mod token_set;
pub(crate) mod toktrie;
pub(crate) mod vocab;
