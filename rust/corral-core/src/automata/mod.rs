//! Automata: each terminal's [`Rx`](crate::frontend::rx::Rx) compiled to a byte-level DFA, with
//! the process-wide caches and ids of terminal languages.

pub(crate) mod bounded_repeat;
pub(crate) mod canonical;
pub(crate) mod construct;
pub(crate) mod det_concat;
pub(crate) mod dfa;
pub(crate) mod fingerprint;
pub(crate) mod id_table;
pub(crate) mod intern;
pub(crate) mod kequiv;
pub(crate) mod live_sets;
pub(crate) mod nfa;
pub(crate) mod term_dfa;
