//! Canonical states ([`crate::automata::dfa::Dfa::canonical_state`]) computed on the background
//! warm-up thread ([`crate::runtime::warmup`]): for the automata a compile built, and for a
//! deferred automaton ([`crate::automata::term_dfa`]) right after a fill builds it.

use crate::automata::dfa::Dfa;
use crate::runtime::warmup::{self, Job};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Hands the canonical states of `dfas` (for tokens of at most `k` bytes) to the background
/// thread, ahead of every warm-up, and returns at once with the automata it did not take —
/// all of them when warm-up is off (the caller then computes them). Automata whose table
/// exists or is being computed already are dropped.
pub(crate) fn canonical_in_background(dfas: Vec<Arc<Dfa>>, k: usize) -> Vec<Arc<Dfa>> {
    if !warmup::enabled() {
        return dfas;
    }
    // (Weakly: a queued job must not keep a dropped grammar's automaton alive; on a busy
    // machine the idle-priority thread may run it much later.)
    let jobs: Vec<Job> = dfas
        .into_iter()
        .filter(|d| d.defer_canonical())
        .map(|d| -> Job {
            let d = Arc::downgrade(&d);
            Box::new(move || {
                if let Some(d) = d.upgrade() {
                    d.compute_canonical(k)
                }
            })
        })
        .collect();
    warmup::queue_urgent_back(jobs);
    Vec::new()
}

/// The token depth of the last compile's canonical states (see [`canonical_after_build`]); 0
/// before any.
static CANON_DEPTH: AtomicUsize = AtomicUsize::new(0);

/// Sets the token depth of the canonical states computed for automata built later
/// ([`canonical_after_build`]).
pub(crate) fn set_canon_depth(k: usize) {
    CANON_DEPTH.store(k, Ordering::Release);
}

/// Hands the canonical states of `d`, a deferred automaton a fill has just built
/// ([`crate::automata::term_dfa`]), to the background thread, as the compile does for the automata it
/// built: otherwise the fill that meets its first state computes them itself (a
/// length-bounded string's table took 1.3 ms inside such a fill). Does nothing on the
/// background thread itself (its builds are followed by the computation), without one, or
/// before any compile.
pub(crate) fn canonical_after_build(d: &Arc<Dfa>) {
    let k = CANON_DEPTH.load(Ordering::Acquire);
    if k == 0 || warmup::is_warmup_thread() {
        return;
    }
    let _ = canonical_in_background(vec![d.clone()], k);
}
