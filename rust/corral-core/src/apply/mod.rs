//! Applying masks: writing −∞ into the logits of disallowed tokens.

pub(crate) mod logits;
pub(crate) mod logits_simd;
