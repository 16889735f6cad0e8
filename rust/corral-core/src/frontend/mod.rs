//! Front ends: grammar and regex syntax to ASTs ([`ebnf`], [`regex`] to [`rx`]), the byte
//! automata front ends build directly, and token classes.

pub(crate) mod byte_automaton;
pub(crate) mod ebnf;
pub(crate) mod regex;
pub(crate) mod rx;
pub(crate) mod token_class;
