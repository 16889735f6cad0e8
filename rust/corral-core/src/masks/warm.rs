//! Background warm-up of a grammar's terminals against a vocabulary: the cache entries of each
//! terminal's opening states, built on the warm-up thread ([`crate::runtime::warmup`], whose
//! module doc tells the whole story) right after a compile, so that the first fills find them.

use crate::automata::dfa::DEAD;
use crate::automata::term_dfa::TermDfa;
use crate::runtime::warmup::{self, Job};
use crate::vocab::ci_cache::Lexer;
use crate::vocab::vocab::Vocabulary;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Most time one grammar's warm-up may take; the rest is left to the fills.
pub(crate) const MAX_WARMUP: Duration = Duration::from_millis(200);

/// Most time the warm-up of one grammar's nearest terminals may take ([`submit_first`]): it
/// runs ahead of everything queued without yielding, so compiles arriving back to back must
/// not keep the rest of the queue waiting long.
const MAX_FIRST_WARMUP: Duration = Duration::from_millis(20);

/// Automata with more states are skipped: their opening walks are no more likely to be
/// needed than any other (their canonical states are computed ahead of the warm-up).
const MAX_STATES: usize = 4096;

/// Queues the warm-up of the terminals `dfas` against `vocab`. Returns at once; does nothing
/// when warm-up is off.
pub(crate) fn submit(dfas: Vec<Arc<TermDfa>>, vocab: Arc<Vocabulary>) {
    let (dfas, vocab) = weakly(dfas, &vocab);
    warmup::in_background(move || {
        if let Some((dfas, vocab)) = alive(&dfas, &vocab) {
            warm(&dfas, &vocab, MAX_WARMUP)
        }
    });
}

/// Weak references to a grammar's terminals and vocabulary, for a queued warm-up: on a busy
/// machine the idle-priority thread may run it long after the grammar was dropped, and the
/// queue must not keep it (its automata, its vocabulary) alive meanwhile.
fn weakly(dfas: Vec<Arc<TermDfa>>, vocab: &Arc<Vocabulary>) -> (Vec<std::sync::Weak<TermDfa>>, std::sync::Weak<Vocabulary>) {
    (dfas.iter().map(Arc::downgrade).collect(), Arc::downgrade(vocab))
}

/// The terminals still alive and the vocabulary, if it is.
fn alive(dfas: &[std::sync::Weak<TermDfa>], vocab: &std::sync::Weak<Vocabulary>) -> Option<(Vec<Arc<TermDfa>>, Arc<Vocabulary>)> {
    let dfas: Vec<Arc<TermDfa>> = dfas.iter().filter_map(|d| d.upgrade()).collect();
    Some((dfas, vocab.upgrade()?)).filter(|(d, _)| !d.is_empty())
}

/// Queues the warm-up of the terminals `dfas` ahead of every job already queued (canonical
/// states included): the terminals a generation meets first, whose entries the first fills
/// after compiling need (a JSON object's keys after its opening brace) — queued behind the
/// canonical states of every automaton, they were ready only milliseconds later. Until an
/// automaton's canonical states exist, fills and this warm-up key its entries by the states
/// themselves, so the two meet in the cache. Does nothing when warm-up is off.
pub(crate) fn submit_first(dfas: Vec<Arc<TermDfa>>, vocab: Arc<Vocabulary>) {
    if !warmup::enabled() || dfas.is_empty() {
        return;
    }
    let (dfas, vocab) = weakly(dfas, &vocab);
    let job: Job = Box::new(move || {
        if let Some((dfas, vocab)) = alive(&dfas, &vocab) {
            warm_terminals(&dfas, &vocab, MAX_FIRST_WARMUP, false)
        }
    });
    warmup::queue_first(job);
}

/// The warm-up itself (also callable directly): for each terminal, in grammar order, its
/// canonical states, and the cache entries of its start state and of the states one byte in
/// (after a string's opening quote) — which computes their language ids on the way. Stops
/// after `budget`.
pub fn warm(dfas: &[Arc<TermDfa>], vocab: &Vocabulary, budget: Duration) {
    warm_terminals(dfas, vocab, budget, true)
}

/// [`warm`], running the queued urgent jobs between terminals when `yield_to_urgent`.
fn warm_terminals(dfas: &[Arc<TermDfa>], vocab: &Vocabulary, budget: Duration, yield_to_urgent: bool) {
    let t0 = Instant::now();
    let trie = vocab.trie();
    let depth = trie.max_depth();
    let words = vocab.mask_words();
    let cache = vocab.cache();
    let urgent = yield_to_urgent && warmup::enabled();
    for term in dfas {
        if urgent {
            warmup::drain_urgent();
        }
        if t0.elapsed() > budget {
            return;
        }
        let dfa = term.get();
        let start = dfa.start();
        // (An empty language's start is the dead state: nothing to walk.)
        if dfa.num_states() > MAX_STATES || start == DEAD {
            continue;
        }
        dfa.canonical_state(start, depth);
        let mut states = vec![start];
        for b in 0..=255u8 {
            let s = dfa.next(start, b);
            if s != DEAD && !states.contains(&s) {
                states.push(s);
            }
        }
        for s in states {
            let l = Lexer { dfa, state: s, gid: term.gid() };
            cache.get(trie, &[l.key(depth)], || vec![l], words);
        }
    }
}
