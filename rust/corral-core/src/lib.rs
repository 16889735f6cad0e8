//! corral-core: grammars (GBNF, regex, automata built by other front ends) compiled to byte-level
//! automata and an Earley parser, matched against a tokenizer vocabulary to produce exact
//! next-token bitmasks.
//!
//! # Map of the layers
//!
//! Each folder is a layer; data flows down this list, and a layer imports only the layers
//! above it here (`tools/check_layers.py` enforces this, and that no module imports cycle).
//!
//! | layer | holds |
//! |---|---|
//! | `runtime/` | beneath all: [`Error`], [`Limits`], the compile budget, the background warm-up thread, helper-thread placement, `ByteSet`, race-once memos |
//! | `frontend/` | syntax to ASTs: GBNF (`ebnf`), regex (`regex` → `rx::Rx`), byte automata built by a front end (`byte_automaton`), token classes |
//! | `automata/` | one terminal's `Rx` → NFA → DFA (`nfa`, `dfa`, `det_concat`, `bounded_repeat`), state equivalence (`kequiv`), language ids (`fingerprint`), terminal caches and ids (`intern`, `id_table`), terminals built on first use (`term_dfa`) |
//! | `parser/` | the AST lowered (`lower`) to a CFG over DFA terminals (`cfg`), the compiled [`Grammar`], the Earley parser (`earley`, `perm` for any-order members) and the joint byte step (`step`) |
//! | `vocab/` | the [`Vocabulary`], its token trie (`toktrie`) and plain-text slice (`slice`) |
//! | `masks/` | token sets cached per lexer state (`ci_cache`), whole-mask cache, mask filling, the [`Matcher`] and [`CompiledGrammar`], batch fills |
//! | `apply/` | a bitmask applied to logits rows (`logits`, x86-64 kernels in `logits_simd`) |
//!
//! `testutil` (tests, benches and examples; `cfg(test)` or the `testing` feature) reads any layer.
//!
//! The public API is what the Python bindings, corral-schema, corral-formats, the benches and
//! the fuzz targets use, re-exported here; every module is private to the crate.

mod apply;
mod automata;
mod frontend;
mod masks;
mod parser;
mod runtime;
mod vocab;
#[cfg(any(test, feature = "testing"))]
pub mod testutil;

pub use apply::logits::{mask_row, mask_rows, NEG_INF_BF16, NEG_INF_F16, NEG_INF_F32};
pub use automata::dfa::{Dfa, DEAD};
pub use automata::kequiv::{predecessor_lists, untouched_member};
pub use frontend::byte_automaton::{minimal_acyclic, summarize, ByteAutomaton, FlatTables, LazyFacts, Summary};
pub use frontend::regex::parse_regex;
pub use frontend::rx::{normalize_ranges, Rx};
pub use frontend::token_class::{TokenClass, TokenRef};
pub use masks::batch::fill_batch;
pub use masks::matcher::{CacheMiss, CompiledGrammar, Matcher};
pub use parser::cfg::Cfg;
pub use parser::grammar::Grammar;
pub use runtime::byteset::ByteSet;
pub use runtime::error::{Error, Location, Result};
pub use runtime::limits::{Limits, LIMIT_HINT};
pub use vocab::ci_cache::{CiCache, CiEntry, Lexer};
pub use vocab::toktrie::TokTrie;
pub use vocab::vocab::Vocabulary;

/// The GBNF front end: [`parse`](ebnf::parse) and the grammar AST that other front ends build.
pub mod ebnf {
    pub use crate::frontend::ebnf::{parse, Expr, GrammarAst, PermSpec, RuleDef};
}

/// Terminal automata by process-wide id (shared by every grammar that uses a terminal).
pub mod intern {
    pub use crate::automata::intern::terminal_dfa;
    pub use crate::automata::term_dfa::terminal;
}

/// Terminal automata built at compile time or on first use.
pub mod term_dfa {
    pub use crate::automata::term_dfa::{build_all, defer_enabled};
}

/// The compile-time budget: a deadline per compilation entry point.
pub mod budget {
    pub use crate::runtime::budget::{check, Scope};
}

/// The background warm-up thread.
pub mod warmup {
    pub use crate::masks::warm::warm;
    pub use crate::runtime::warmup::{drop_in_background, enabled, in_background, may_use_pool, wait_idle};
}

/// Helper threads placed on another CPU than the caller's.
pub mod off_cpu {
    pub use crate::runtime::off_cpu::share;
}
