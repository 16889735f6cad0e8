//! A terminal's automaton, built at compile time or on first use.
//!
//! Most of a large JSON Schema's compile went to the automata of its literals: every key and
//! every enum value spelled with all its JSON escapes (`"a"`, `"\u0061"`, …) is about six
//! states per character, thousands per schema, and a generation meets few of them early (the
//! keys of the root object) or never (the other branches of an `anyOf`). Terminals whose
//! automaton can be built later with no chance of failing
//! ([`crate::automata::det_concat::deferrable`]: deterministic concatenations of literals and embedded
//! automata, short length-bounded strings, unions of JSON string literals — within the state
//! limit by construction) are
//! left unbuilt by lowering; everything lowering needs of them (nullable, empty) is known
//! from their parts. The background thread builds them right after the compile, nearest the
//! start first ([`crate::runtime::warmup`]), and a fill that needs one before that builds it itself.
//! The automaton is the one an eager build gives (same construction, same state numbers), so
//! caches keyed by `(terminal id, state)` are shared with eager builds.
//!
//! With `CORRAL_DEFER_AUTOMATA=0` in the environment, lowering still leaves these automata
//! unbuilt but builds them all before the compile returns ([`build_all`]): they are
//! independent of each other, so a large schema's go on two threads (the calling thread and
//! one pool thread, from opposite ends), and the fills find everything built as with an eager
//! build. (Session 16, the three slowest schemas of the benchmark's common set in a warm
//! process, `examples/compile_prof.rs`: o84878 1.36–1.53 → 1.24–1.27 ms, o60295 1.33–1.65 →
//! 1.26–1.40, o12457 1.07–1.19 → 1.06–1.11. Session 18: on this 2-CPU VM the pool thread
//! often started only after the caller had built everything — a thread woken while the other
//! CPU has idled a few milliseconds is put on the waker's CPU; handing it each automaton as
//! lowering leaves it, or a helper kept off the caller's CPU, did not help: the two largest
//! automata of o60295, its "any other key" ones, ~750 states and 150–370 µs each, are most of
//! the work, and two threads building at once are bound by fresh memory. Session 20, with
//! deferral on and the background thread kept off the caller's CPU: handing it each deferred
//! automaton as lowering creates it, so that the start state's mask would find the root's
//! keys built, made compile plus start mask p99 over the benchmark's common schemas 1.23–1.36
//! → 1.72–1.87 ms in `fill_profile` — it built them in creation order, nested keys first,
//! while contending with the compile. Session 21: length-bounded strings deferred too took
//! o21460, one `maxLength: 160` string, from 0.94 to 0.22 ms of first compile in
//! `compile_prof`, but the fill that then built a long one paid 1–2 ms for it — o9892's
//! 256-character chunks made a 2.1 ms fill in the benchmark — so only repetitions of at most
//! 256 states are deferred: `det_concat`'s `MAX_DEFERRED_REPEAT_STATES`. Session 24 tried
//! 4,096 — a `maxLength` up to 195 — and went back: see the constant.)
//!
//! **Leaving them to after the compile is the default since session 19.** It moves work, it
//! does not save it: the background thread ([`crate::runtime::warmup`], kept off the compiling
//! thread's CPU) builds them while the caller's first fills run, and a fill that meets one
//! first builds it — or, when the background thread is building it, spins up to
//! [`MAX_WAIT`] for it — and hands its canonical states to the background thread, as the
//! compile does for the automata it builds (computed in the fill, the table of o21460's
//! deferred `maxLength: 160` string took 1.3 ms of a 2.5–3 ms fill). The benchmark shows both sides (`benches/compare.py --limit 100`,
//! JSONSchemaBench with Llama 3, the 62 schemas every engine compiled; runs s19b off and
//! s19d on, the same code otherwise): compile p99 2.03 → 1.60 ms (llguidance 2.11 / 2.14),
//! time to first mask p99 2.06 → 1.62, compile p50 0.59 → 0.55; fill p99 32.1 → 34.7 µs,
//! p99.9 92 → 193, max 307 → 384 (all 100 schemas: 2,513 → 835). In session 12 (no
//! background placement, yield-bounded waits) the same trade was compile p99 3.3–3.8 →
//! 2.3–2.7 ms against fill p99 34–40 → 36–46 µs and p99.9 100–140 → 140–280, and it stayed
//! off. The benchmark's fills follow the compile back to back, so a walk can reach a nested
//! object's keys or an enum before the background thread has built them; where each fill
//! after the first follows a forward pass of milliseconds, the builds are done by then.

use crate::automata::dfa::Dfa;
use crate::frontend::rx::Rx;
use crate::runtime::error::Result;
use crate::runtime::limits::Limits;
use std::sync::{Arc, OnceLock};

/// Longest a caller spins while another thread of this process builds the automaton, before
/// building it itself: about the build time of a large key automaton. (Session 19: bounded by
/// 200 `yield_now` calls instead, a compile whose first fill met an automaton claimed by the
/// idle-priority background thread took 3.8–4.9 ms instead of 0.6–1.0 in the benchmark, each
/// time right after another engine's worker had run for seconds — the background thread got
/// no CPU time and each yield could give the caller's CPU away for a time slice.)
const MAX_WAIT: std::time::Duration = std::time::Duration::from_micros(150);

/// Whether this process may run on one CPU only (read once).
fn one_cpu() -> bool {
    static ONE: OnceLock<bool> = OnceLock::new();
    *ONE.get_or_init(|| std::thread::available_parallelism().map_or(true, |n| n.get() == 1))
}

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
    /// (from [`crate::automata::det_concat::deferrable`], which also guarantees the build succeeds).
    pub(crate) fn deferred(rx: Rx, gid: u32, d: crate::automata::det_concat::Deferred) -> TermDfa {
        TermDfa { dfa: OnceLock::new(), builder: Default::default(), rx: Some(rx), max_states: d.max_states, gid, nullable: d.nullable, empty: d.empty }
    }

    /// The automaton, built now if it was not. One thread builds it; another thread of the
    /// process that needs it meanwhile waits for that build at most [`MAX_WAIT`] (a fill
    /// meeting an automaton the background thread is finishing gets it sooner than by
    /// building it), then builds it too. The claim is
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
        // Waiting is bounded in time: the background thread runs at idle priority and may get
        // no CPU time on a busy machine; past the bound this caller builds it too (the same
        // automaton; the first one stored is kept). The caller spins rather than yields, so
        // that it keeps its CPU; with one CPU it does not wait at all.
        let mut since: Option<std::time::Instant> = None;
        let _claim = loop {
            if let Some(d) = self.dfa.get() {
                return d;
            }
            match self.builder.compare_exchange(0, pid, Ordering::AcqRel, Ordering::Acquire) {
                Ok(_) => break Some(Claim(&self.builder)),
                Err(other) if other == pid && one_cpu() => break None,
                Err(other) if other == pid && since.get_or_insert_with(std::time::Instant::now).elapsed() < MAX_WAIT => {
                    for _ in 0..64 {
                        std::hint::spin_loop();
                    }
                }
                Err(other) if other == pid => break None,
                // Claimed in the parent of this forked process: nobody here will finish it.
                Err(_) => break None,
            }
        };
        let rx = self.rx.as_ref().expect("an unbuilt automaton keeps its expression");
        let built = crate::automata::intern::build_deferred(rx, self.gid);
        let d = self.dfa.get_or_init(|| built);
        crate::automata::canonical::canonical_after_build(d);
        d
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
            let built = crate::automata::intern::build_deferred(rx, self.gid);
            let _ = self.dfa.set(built);
        }
    }

    /// The terminal's process-wide id ([`crate::automata::intern`]).
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
pub fn build_all(terms: &[Arc<TermDfa>]) {
    let pending: Vec<Arc<TermDfa>> = terms.iter().filter(|t| t.if_built().is_none()).cloned().collect();
    let states: usize = pending.iter().map(|t| t.max_states).sum();
    if pending.len() >= 2 && states >= PARALLEL_STATES && crate::runtime::warmup::may_use_pool() {
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

/// Whether lowering leaves the automata it may to after the compile: yes unless
/// `CORRAL_DEFER_AUTOMATA=0` is in the environment (read once per process; see the module
/// documentation for the trade).
pub fn defer_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(|| !std::env::var("CORRAL_DEFER_AUTOMATA").is_ok_and(|v| v.trim() == "0"))
}

/// Queues the construction of the deferred automata `terms` ([`crate::automata::term_dfa`]), in order,
/// each followed by its canonical states for tokens of at most `k` bytes (what the
/// canonical-state jobs do for the automata the compile built). Queued at the front of the
/// urgent jobs — a fill that meets an automaton not built yet builds it, while one that meets
/// missing canonical states only keys its entries by the states themselves — so only a
/// `crate::masks::warm::submit_first` queued after it runs first; when a later compile queues one while the
/// builds run, they stop between automata to let it run. Without a background thread does
/// nothing (the fills build them).
pub(crate) fn build_in_background(terms: Vec<Arc<TermDfa>>, k: usize) {
    if !crate::runtime::warmup::enabled() {
        return;
    }
    crate::automata::canonical::set_canon_depth(k);
    if terms.is_empty() {
        return;
    }
    // (Weakly: a grammar dropped before the job runs is skipped, not kept alive by the queue.)
    let terms: Vec<std::sync::Weak<TermDfa>> = terms.iter().map(Arc::downgrade).collect();
    let job: crate::runtime::warmup::Job = Box::new(move || {
        // (Read when the job starts: this compile's own `submit_first`, queued after it, has
        // run by then.)
        let mut seen = crate::runtime::warmup::first_submits();
        for t in &terms {
            let now = crate::runtime::warmup::first_submits();
            if now != seen {
                seen = now;
                crate::runtime::warmup::drain_urgent();
            }
            let Some(t) = t.upgrade() else { continue };
            let d = t.get();
            if d.defer_canonical() {
                d.compute_canonical(k);
            }
        }
    });
    crate::runtime::warmup::queue_urgent_front(job);
}

/// The terminal of `rx`: its automaton (by its process-wide id, [`crate::automata::intern`]) — cached, built now, or (when `defer` and
/// [`crate::automata::det_concat::deferrable`] allows) left to be built on first use
/// ([`TermDfa`]) — and its process-wide id.
pub fn terminal(rx: &Rx, limits: &Limits, defer: bool) -> Result<(TermDfa, u32)> {
    let id = crate::automata::intern::terminal_id(rx)?;
    if let Some(d) = crate::automata::intern::cached_within(id, limits)? {
        return Ok((TermDfa::built(d, id), id));
    }
    if defer {
        if let Some(d) = crate::automata::det_concat::deferrable(rx, crate::automata::dfa::state_limit(limits)) {
            return Ok((TermDfa::deferred(rx.clone(), id, d), id));
        }
    }
    let d = crate::automata::intern::build(rx, id, limits)?;
    Ok((TermDfa::built(d, id), id))
}
