//! Vocabulary: a tokenizer's tokens as bytes, their trie, and the plain-text slice of it.

pub(crate) mod slice;
pub(crate) mod toktrie;
pub(crate) mod vocab;
