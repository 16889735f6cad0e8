//! Masks: next-token bitmasks from the parser state and the vocabulary, the caches behind them, and the per-sequence matcher.

pub(crate) mod batch;
pub(crate) mod mask_cache;
pub(crate) mod mask_fill;
pub(crate) mod matcher;
pub(crate) mod warm;
