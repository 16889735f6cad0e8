//! A terminal's automaton, built at compile time or on first use.
//!
//! Most of a large JSON Schema's compile went to the automata of its literals: every key and
//! every enum value spelled with all its JSON escapes (`"a"`, `"\u0061"`, …) is about six
//! states per character, thousands per schema, and a generation meets few of them early (the
//! keys of the root object) or never (the other branches of an `anyOf`). Terminals whose
//! automaton can be built later with no chance of failing
//! ([`crate::det_concat::deferrable`]: deterministic concatenations of literals and embedded
//! automata, unions of JSON string literals — within the state limit by construction) are
//! left unbuilt by lowering; everything lowering needs of them (nullable, empty) is known
//! from their parts. The background thread builds them right after the compile, nearest the
//! start first ([`crate::warmup`]), and a fill that needs one before that builds it itself.
//! The automaton is the one an eager build gives (same construction, same state numbers), so
//! caches keyed by `(terminal id, state)` are shared with eager builds.
//!
//! It moves work, it does not save it, and the benchmark shows both sides
//! (`benches/compare.py`, JSONSchemaBench with Llama 3, corral alone, three runs each, the 63
//! schemas every engine compiles): compile p50 0.80–0.84 → 0.73–0.74 ms and p99 3.39–3.43 →
//! 2.29–2.56 ms, while the fill p99 rose from 33.6–36.5 to 37.4–41.7 µs — the benchmark's
//! fills follow the compile back to back, so a walk reaches a nested object's keys or an enum
//! within a few fills, sometimes before the background thread has built them. In a server,
//! where each fill after the first follows a forward pass of milliseconds, the builds are
//! done by then. `CORRAL_DEFER_AUTOMATA=0` in the environment turns deferral off (every
//! automaton built by the compile, as before).

use crate::dfa::Dfa;
use crate::rx::Rx;
use std::sync::{Arc, OnceLock};

/// A terminal's automaton: built, or an expression to build it from on first use.
#[derive(Debug)]
pub struct TermDfa {
    dfa: OnceLock<Arc<Dfa>>,
    /// The expression of a deferred automaton (`None` when built at once).
    rx: Option<Rx>,
    /// The terminal's process-wide id (the automaton cache's key).
    gid: u32,
    nullable: bool,
    empty: bool,
}

impl TermDfa {
    /// An automaton built already.
    pub fn built(dfa: Arc<Dfa>, gid: u32) -> TermDfa {
        let (nullable, empty) = (dfa.nullable(), dfa.is_empty_language());
        TermDfa { dfa: OnceLock::from(dfa), rx: None, gid, nullable, empty }
    }

    /// The automaton of `rx`, to be built on first use; `d` says what lowering needs of it
    /// (from [`crate::det_concat::deferrable`], which also guarantees the build succeeds).
    pub(crate) fn deferred(rx: Rx, gid: u32, d: crate::det_concat::Deferred) -> TermDfa {
        TermDfa { dfa: OnceLock::new(), rx: Some(rx), gid, nullable: d.nullable, empty: d.empty }
    }

    /// The automaton, built now if it was not (once: a concurrent caller waits for the
    /// first).
    #[inline]
    pub fn get(&self) -> &Arc<Dfa> {
        match self.dfa.get() {
            Some(d) => d,
            None => self.dfa.get_or_init(|| crate::intern::build_deferred(self.rx.as_ref().expect("an unbuilt automaton keeps its expression"), self.gid)),
        }
    }

    /// The automaton if it is built.
    pub fn if_built(&self) -> Option<&Arc<Dfa>> {
        self.dfa.get()
    }

    /// Whether the terminal's expression matches the empty string.
    pub fn nullable(&self) -> bool {
        self.nullable
    }

    /// Whether the terminal matches no non-empty string.
    pub fn is_empty_language(&self) -> bool {
        self.empty
    }
}

/// Whether lowering defers the automata it may: on unless `CORRAL_DEFER_AUTOMATA=0` is in the
/// environment (read once per process).
pub fn defer_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| !std::env::var("CORRAL_DEFER_AUTOMATA").is_ok_and(|v| v.trim() == "0"))
}
