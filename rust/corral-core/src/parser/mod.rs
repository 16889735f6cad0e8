//! Parser: the grammar lowered to a CFG over automaton terminals, and the Earley parser that
//! runs it one byte at a time.

pub(crate) mod cfg;
pub(crate) mod earley;
pub(crate) mod grammar;
pub(crate) mod lower;
pub(crate) mod perm;
pub(crate) mod step;
