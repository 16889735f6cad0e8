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
//! Off by default (`CORRAL_DEFER_AUTOMATA=1` in the environment turns it on): it moves work,
//! it does not save it, and the benchmark shows both sides (`benches/compare.py`,
//! JSONSchemaBench with Llama 3, corral alone, the 63 schemas every engine compiles; six
//! runs on, six off, session 12): compile p50 0.79–0.84 → 0.72–0.76 ms and p99 3.3–3.8 →
//! 2.3–2.7 ms, but the fill p99 went from 34–40 to 36–46 µs and the p99.9 from 100–140 to
//! 140–280 µs. The benchmark's fills follow the compile back to back, so a walk reaches a
//! nested object's keys or an enum within a few fills, often before the background thread
//! has built them; so would a speculative decoder verifying a batch of drafts right after
//! the prompt. Where each fill after the first follows a forward pass of milliseconds, the
//! builds are done by then and it shortens the compile and the time to first mask.

use crate::dfa::Dfa;
use crate::rx::Rx;
use std::sync::{Arc, OnceLock};

/// Yields a caller makes while another thread of this process builds the automaton, before
/// building it itself.
const MAX_WAITS: u32 = 200;

/// A terminal's automaton: built, or an expression to build it from on first use.
#[derive(Debug)]
pub struct TermDfa {
    dfa: OnceLock<Arc<Dfa>>,
    /// The id of the process whose thread is building the automaton; 0 when none is.
    builder: std::sync::atomic::AtomicU32,
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
        TermDfa { dfa: OnceLock::from(dfa), builder: Default::default(), rx: None, gid, nullable, empty }
    }

    /// The automaton of `rx`, to be built on first use; `d` says what lowering needs of it
    /// (from [`crate::det_concat::deferrable`], which also guarantees the build succeeds).
    pub(crate) fn deferred(rx: Rx, gid: u32, d: crate::det_concat::Deferred) -> TermDfa {
        TermDfa { dfa: OnceLock::new(), builder: Default::default(), rx: Some(rx), gid, nullable: d.nullable, empty: d.empty }
    }

    /// The automaton, built now if it was not. One thread builds it; another thread of the
    /// process that needs it meanwhile waits for that build (a fill meeting an automaton the
    /// background thread is finishing gets it sooner than by building it). The claim is
    /// by process id, not a lock: a process forked while a thread of its parent was
    /// building builds the automaton itself instead of waiting for a thread it does not
    /// have.
    #[inline]
    pub fn get(&self) -> &Arc<Dfa> {
        match self.dfa.get() {
            Some(d) => d,
            None => self.build(),
        }
    }

    #[cold]
    fn build(&self) -> &Arc<Dfa> {
        use std::sync::atomic::Ordering;
        let pid = std::process::id();
        // Released even if the build panics (the next caller builds it then).
        struct Release<'a>(&'a std::sync::atomic::AtomicU32);
        impl Drop for Release<'_> {
            fn drop(&mut self) {
                self.0.store(0, Ordering::Release);
            }
        }
        // Waiting is bounded: the background thread runs at idle priority and may get no CPU
        // time on a busy machine; past the bound this caller builds it too (the same
        // automaton; the first one stored is kept).
        let mut waits = 0u32;
        let _claim = loop {
            if let Some(d) = self.dfa.get() {
                return d;
            }
            match self.builder.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break Some(Release(&self.builder)),
                Err(other) if other == pid && waits < MAX_WAITS => {
                    waits += 1;
                    std::thread::yield_now();
                }
                Err(other) if other == pid => break None,
                // Claimed in the parent of this forked process: nobody here will finish it.
                Err(_) => break None,
            }
        };
        let rx = self.rx.as_ref().expect("an unbuilt automaton keeps its expression");
        let built = crate::intern::build_deferred(rx, self.gid);
        self.dfa.get_or_init(|| built)
    }

    /// The terminal's process-wide id ([`crate::intern`]).
    pub fn gid(&self) -> u32 {
        self.gid
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

/// Whether lowering defers the automata it may: only with `CORRAL_DEFER_AUTOMATA=1` in the
/// environment (read once per process; see the module documentation for when it pays).
pub fn defer_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CORRAL_DEFER_AUTOMATA").is_ok_and(|v| v.trim() == "1"))
}
