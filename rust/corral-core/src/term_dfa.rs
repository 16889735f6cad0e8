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
//! By default lowering still leaves these automata unbuilt, but builds them all before the
//! compile returns ([`build_all`]): they are independent of each other, so a large schema's
//! go on two threads (the calling thread and one pool thread, from opposite ends), and the
//! fills find everything built as with an eager build. Session 16, the three slowest schemas
//! of the benchmark's common set in a warm process (`examples/compile_prof.rs`), o84878
//! 1.36–1.53 → 1.24–1.27 ms, o60295 1.33–1.65 → 1.26–1.40, o12457 1.07–1.19 → 1.06–1.11;
//! what is left of their compile is mostly the schema translation and lowering.
//!
//! Session 18 (first compiles in the benchmark's order with 64 MB swept before each): the pool
//! thread often started only after the caller had built everything — on this 2-CPU VM a
//! thread woken while the other CPU has been idle a few milliseconds is put on the waker's
//! CPU (30 of 30 trials), so for o60295 (32 automata, 4,734 states) the automata took
//! 0.55–0.86 ms with the helper as without. Two fixes were measured and dropped: (1) handing
//! each automaton to the helper as lowering leaves it (the helper started once 256 states
//! were queued, 27–40 µs after), o60295 1.97 → 2.01 ms median of ten, o84878 1.70 → 1.55,
//! the Python loop over the common set unchanged (compile p99 2.35–2.65 vs 2.37–2.59 ms): its
//! two largest automata ("any other key", ~750 states, 150–370 µs each) are most of the
//! work and come late; (2) a helper thread kept off the caller's CPU (what [`crate::off_cpu`]
//! does for mask application; it started in 23–56 µs and built 18 of o60295's 32 automata): build
//! 0.38–0.60 ms, but the compile in the Python loop moved within noise (o84878 2.0 → 1.86 ms,
//! o60295 unchanged — two threads building at once are bound by fresh memory), while fills
//! whose large walks it also split got slower (fills over 100 µs over the benchmark's walks
//! 54–60 → 60–73).
//!
//! Leaving them to after the compile is off by default (`CORRAL_DEFER_AUTOMATA=1` in the
//! environment turns it on): it moves work,
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
    /// Most states a deferred automaton can have (0 when built at once).
    max_states: usize,
    /// The terminal's process-wide id (the automaton cache's key).
    gid: u32,
    nullable: bool,
    empty: bool,
}

impl TermDfa {
    /// An automaton built already.
    pub fn built(dfa: Arc<Dfa>, gid: u32) -> TermDfa {
        let (nullable, empty) = (dfa.nullable(), dfa.is_empty_language());
        TermDfa { dfa: OnceLock::from(dfa), builder: Default::default(), rx: None, max_states: 0, gid, nullable, empty }
    }

    /// The automaton of `rx`, to be built on first use; `d` says what lowering needs of it
    /// (from [`crate::det_concat::deferrable`], which also guarantees the build succeeds).
    pub(crate) fn deferred(rx: Rx, gid: u32, d: crate::det_concat::Deferred) -> TermDfa {
        TermDfa { dfa: OnceLock::new(), builder: Default::default(), rx: Some(rx), max_states: d.max_states, gid, nullable: d.nullable, empty: d.empty }
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
        // Waiting is bounded: the background thread runs at idle priority and may get no CPU
        // time on a busy machine; past the bound this caller builds it too (the same
        // automaton; the first one stored is kept).
        let mut waits = 0u32;
        let _claim = loop {
            if let Some(d) = self.dfa.get() {
                return d;
            }
            match self.builder.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break Some(Claim(&self.builder)),
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

    /// Builds the automaton unless it is built or another thread is building it (a helper
    /// that must never wait: [`build_all`]).
    fn build_unless_claimed(&self) {
        use std::sync::atomic::Ordering;
        if self.dfa.get().is_some() || self.builder.compare_exchange(0, std::process::id(), Ordering::AcqRel, Ordering::Acquire).is_err() {
            return;
        }
        let _claim = Claim(&self.builder);
        if self.dfa.get().is_none() {
            let rx = self.rx.as_ref().expect("an unbuilt automaton keeps its expression");
            let built = crate::intern::build_deferred(rx, self.gid);
            let _ = self.dfa.set(built);
        }
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

/// A thread's claim on building an automaton ([`TermDfa::builder`]), released when dropped —
/// also when the build panics (the next caller builds it then).
struct Claim<'a>(&'a std::sync::atomic::AtomicU32);

impl Drop for Claim<'_> {
    fn drop(&mut self) {
        self.0.store(0, std::sync::atomic::Ordering::Release);
    }
}

/// Deferred automata of one compile whose states add up to at least this many are built on
/// two threads ([`build_all`]): about 100 µs of work, several times a pool thread's wake-up.
const PARALLEL_STATES: usize = 1_000;

/// Builds every automaton in `terms` that is not built, before the compile returns: the
/// calling thread from the first, and, when they are large enough to pay for waking it, one
/// pool thread from the last, each skipping what the other has taken (the caller waits for
/// one the helper is finishing). The automata are those an eager build gives; a compile's
/// automata are independent of each other, so on two cores up to half of the time they take
/// (a sixth to a half of a large schema's compile: JSON-encoded keys and enums) is saved.
pub(crate) fn build_all(terms: &[Arc<TermDfa>]) {
    let pending: Vec<Arc<TermDfa>> = terms.iter().filter(|t| t.if_built().is_none()).cloned().collect();
    let states: usize = pending.iter().map(|t| t.max_states).sum();
    if pending.len() >= 2 && states >= PARALLEL_STATES && rayon::current_num_threads() > 1 {
        let helper = pending.clone();
        rayon::spawn(move || {
            // (A panic here leaves the automaton to the caller, which builds it and reports
            // the panic as an internal error; it must not abort the process from the pool.)
            let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| helper.iter().rev().for_each(|t| t.build_unless_claimed())));
        });
    }
    for t in &pending {
        t.get();
    }
}

/// Whether lowering defers the automata it may: only with `CORRAL_DEFER_AUTOMATA=1` in the
/// environment (read once per process; see the module documentation for when it pays).
pub fn defer_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| std::env::var("CORRAL_DEFER_AUTOMATA").is_ok_and(|v| v.trim() == "1"))
}
