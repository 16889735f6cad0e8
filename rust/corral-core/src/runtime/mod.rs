//! Runtime: errors, limits and budgets, background threads, and the small shared types beneath
//! every layer.

pub(crate) mod budget;
pub(crate) mod byteset;
pub(crate) mod error;
pub(crate) mod hash;
pub(crate) mod limits;
pub mod memory;
pub mod miss_diag;
pub(crate) mod off_cpu;
pub(crate) mod race_once;
pub(crate) mod warmup;
