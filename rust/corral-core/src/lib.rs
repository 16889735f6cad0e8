//! corral-core: grammars (GBNF, regex, automata built by other front ends) compiled to byte-level
//! automata and an Earley parser, matched against a tokenizer vocabulary to produce exact
//! next-token bitmasks.
//!
//! # Map of the layers
//!
//! Each folder is a layer, listed in import order: a layer imports only layers listed before
//! it (parser and vocab not each other). Data flows from `frontend/` down to `apply/`;
//! `runtime/` is beneath all. `tools/check_layers.py` (in `make test`) enforces the order and
//! that no two modules import each other, directly or around a cycle.
//!
//! | layer | holds |
//! |---|---|
//! | `runtime/` | beneath all: [`Error`], [`Limits`], the compile `budget`, the background `warmup` thread and its queues, helper-thread placement (`off_cpu`), [`ByteSet`], `hash`, `race_once` memos |
//! | `frontend/` | syntax to ASTs: GBNF (`ebnf`), regex (`regex` → [`Rx`], `rx`), automata built directly by a front end ([`ByteAutomaton`]), token classes (`token_class`) |
//! | `automata/` | one terminal's `Rx` → NFA → [`Dfa`] (`construct` picks `bounded_repeat`, `det_concat` or `nfa`; `dfa`, `live_sets`), state equivalence (`kequiv`), language ids (`fingerprint`), terminal ids and caches (`intern`, `id_table`), terminals built on first use (`term_dfa`), canonical states on the warm-up thread (`canonical`) |
//! | `parser/` | the AST lowered (`lower`) to a [`Cfg`] over DFA terminals, the compiled [`Grammar`], the Earley parser (`earley`; `perm` for any-order members) and the joint byte step (`step`) |
//! | `vocab/` | the [`Vocabulary`], its [`TokTrie`] and plain-text `slice`, and the token sets per lexer state it caches ([`CiCache`] in `ci_cache`, `token_set`) |
//! | `masks/` | next-token bitmasks: the whole-mask cache (`mask_cache`), filling (`mask_fill`), the [`Matcher`] and [`CompiledGrammar`] (`matcher`), [`fill_batch`] (`batch`), the warm-up of a grammar's terminals (`warm`) |
//! | `apply/` | a bitmask applied to logits rows ([`mask_rows`] in `logits`; x86-64 kernels in `logits_simd`) |
//!
//! `testutil` (tests, benches and examples; `cfg(test)` or the `testing` feature) reads any layer.
//!
//! The public API is what the Python bindings, corral-schema, corral-formats, the benches and
//! the fuzz targets use, re-exported here (types at the root; functions in the small facade
//! modules at the end: `ebnf`, `intern`, `term_dfa`, `budget`, `warmup`, `off_cpu`). The layer
//! modules are private to the crate, and items nothing outside uses are `pub(crate)`.

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
pub use frontend::byte_automaton::{minimal_acyclic, minimal_acyclic_within_budget, summarize, ByteAutomaton, FlatTables, LazyFacts, Summary};
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

/// One byte budget over every cache corral keeps ([`runtime::memory`]); front ends' own caches
/// (the schema compiler's) join it through [`memory::Cache`] and [`memory::register`].
pub mod memory {
    pub use crate::masks::compile_cache::compiled;
    pub use crate::runtime::memory::{budget, evict_now, now, parse_budget, priority, register, set_budget, stats, Account, Cache, Kind, KindStats, Sample, Stats, Victim, DEFAULT_BUDGET, UNLIMITED};
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
