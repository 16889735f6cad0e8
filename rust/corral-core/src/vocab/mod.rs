//! Vocabulary: a tokenizer's tokens as bytes, their trie, and the plain-text slice of it.

pub(crate) mod ci_cache;
pub(crate) mod slice;
pub(crate) mod token_set;
pub(crate) mod toktrie;
pub(crate) mod vocab;
