//! Background warm-up: the per-terminal work a lazy engine would do at its first fills,
//! done on one process-wide background thread right after a grammar is compiled.
//!
//! The first fill that meets a terminal pays for the tables its cache keys need (canonical
//! states, [`crate::dfa::Dfa::canonical_state`]; language ids of string-like states) and for
//! the first walks of its opening states — at a JSON object's key position, once per declared
//! name, all in one fill. Compiling does none of it (compile time stays what it was); the
//! thread does it while the engine prefills and decodes the first tokens, which in a server
//! takes milliseconds. Results are the same either way: the tables are memoized per automaton
//! and entries are cached by key, so only who pays changes, and a fill that needs a table the
//! thread is computing waits for it rather than computing it twice.
//!
//! `CORRAL_BACKGROUND_WARMUP=0` in the environment turns it off (read once per process).

use crate::ci_cache::Lexer;
use crate::dfa::{Dfa, DEAD};
use crate::vocab::Vocabulary;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::{channel, Sender};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

/// Most time one grammar's warm-up may take; the rest is left to the fills.
pub const MAX_WARMUP: Duration = Duration::from_millis(200);

/// Automata with more states are skipped: their canonical states are computed at compile
/// time already, and their opening walks are no more likely to be needed than any other.
const MAX_STATES: usize = 4096;

type Job = Box<dyn FnOnce() + Send>;

struct Worker {
    tx: Mutex<Sender<Job>>,
    pending: Arc<AtomicUsize>,
    /// The process that started the thread: a child forked after that has no thread (jobs
    /// would pile up unrun), so it skips warm-up.
    pid: u32,
}

fn worker() -> Option<&'static Worker> {
    static W: OnceLock<Option<Worker>> = OnceLock::new();
    let w = W.get_or_init(|| {
        if std::env::var("CORRAL_BACKGROUND_WARMUP").is_ok_and(|v| v.trim() == "0") {
            return None;
        }
        let (tx, rx) = channel::<Job>();
        let pending = Arc::new(AtomicUsize::new(0));
        let p = pending.clone();
        std::thread::Builder::new()
            .name("corral-warmup".into())
            // Deep automata recurse in places (the schema compiler's stack size).
            .stack_size(64 << 20)
            .spawn(move || {
                for job in rx {
                    // A panic in one job must not end the thread (nor reach a caller): the
                    // work is an optimisation, and the fills redo whatever it left undone.
                    let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(job));
                    p.fetch_sub(1, Ordering::AcqRel);
                }
            })
            .ok()?;
        Some(Worker { tx: Mutex::new(tx), pending, pid: std::process::id() })
    });
    w.as_ref().filter(|w| w.pid == std::process::id())
}

/// Whether background warm-up is on in this process.
pub fn enabled() -> bool {
    worker().is_some()
}

/// Queues the warm-up of the terminals `dfas` (with their process-wide ids) against `vocab`.
/// Returns at once; does nothing when warm-up is off.
pub fn submit(dfas: Vec<(Arc<Dfa>, u32)>, vocab: Arc<Vocabulary>) {
    let Some(w) = worker() else { return };
    w.pending.fetch_add(1, Ordering::AcqRel);
    let sent = w.tx.lock().unwrap_or_else(|p| p.into_inner()).send(Box::new(move || warm(&dfas, &vocab, MAX_WARMUP)));
    if sent.is_err() {
        w.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

/// Blocks until every queued warm-up has finished (for tests and benchmarks that want to
/// measure warm or cold states deliberately).
pub fn wait_idle() {
    if let Some(w) = worker() {
        while w.pending.load(Ordering::Acquire) > 0 {
            std::thread::sleep(Duration::from_micros(200));
        }
    }
}

/// The warm-up itself (also callable directly): for each terminal, in grammar order, its
/// canonical states, and the cache entries of its start state and of the states one byte in
/// (after a string's opening quote) — which computes their language ids on the way. Stops
/// after `budget`.
pub fn warm(dfas: &[(Arc<Dfa>, u32)], vocab: &Vocabulary, budget: Duration) {
    let t0 = Instant::now();
    let trie = vocab.trie();
    let depth = trie.max_depth();
    let words = vocab.mask_words();
    let cache = vocab.cache();
    for (dfa, gid) in dfas {
        if t0.elapsed() > budget {
            return;
        }
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
            let l = Lexer { dfa, state: s, gid: *gid };
            cache.get(trie, &[l.key(depth)], || vec![l], words);
        }
    }
}
