//! corral-core: grammars (GBNF, regex) compiled to byte-level automata and an Earley parser,
//! matched against a tokenizer vocabulary to produce exact next-token bitmasks.
//!
//! Layers, each in its own module:
//! [`rx`] regex AST → [`nfa`] → [`dfa`] (one per terminal); [`ebnf`] GBNF parser →
//! [`lower`] → [`cfg`] (CFG over DFA terminals); [`earley`] parser rows; [`step`] the joint
//! byte step; [`vocab`] + [`toktrie`] the vocabulary; [`matcher`] the per-sequence state.

pub mod batch;
pub mod budget;
pub mod byte_automaton;
pub mod byteset;
pub mod cfg;
pub mod ci_cache;
mod bounded_repeat;
mod det_concat;
pub mod dfa;
pub mod earley;
pub mod ebnf;
pub mod error;
pub mod grammar;
pub mod id_table;
pub mod fingerprint;
pub mod intern;
pub mod kequiv;
pub mod limits;
pub mod live_sets;
pub mod logits;
pub mod logits_simd;
pub mod lower;
pub mod mask_cache;
pub mod mask_fill;
pub mod matcher;
pub mod nfa;
pub mod off_cpu;
pub mod perm;
mod race_once;
pub mod regex;
pub mod rx;
pub mod slice;
pub mod step;
pub mod term_dfa;
pub mod token_class;
pub mod token_set;
pub mod toktrie;
pub mod testutil;
pub mod vocab;
pub mod warmup;

pub use error::{Error, Location, Result};
pub use grammar::Grammar;
pub use limits::Limits;
pub use matcher::{CacheMiss, CompiledGrammar, Matcher};
pub use vocab::Vocabulary;
