//! Masks: next-token bitmasks from the parser state and the vocabulary: the whole-mask cache,
//! filling, the per-sequence matcher, batch fills, and the warm-up of a grammar's terminals.

pub(crate) mod batch;
pub mod compile_cache;
pub(crate) mod mask_cache;
pub(crate) mod mask_fill;
pub(crate) mod matcher;
pub(crate) mod warm;
