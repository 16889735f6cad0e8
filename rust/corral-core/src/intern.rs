//! Process-wide ids for terminal languages, so caches keyed by (terminal, DFA state) are
//! shared by every grammar that contains the same terminal (e.g. JSON string contents).

use crate::dfa::Dfa;
use crate::error::{Error, Result};
use crate::limits::{Limits, LIMIT_HINT};
use crate::rx::Rx;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, OnceLock};

fn table() -> &'static Mutex<FxHashMap<Rx, u32>> {
    static T: OnceLock<Mutex<FxHashMap<Rx, u32>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(FxHashMap::default()))
}

/// The process-wide id of the language of `rx` (structurally equal expressions share an id;
/// DFA construction is deterministic, so equal ids mean identical automata and state numbers).
pub fn terminal_id(rx: &Rx) -> u32 {
    let mut t = table().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(&id) = t.get(rx) {
        return id;
    }
    let id = t.len() as u32;
    t.insert(rx.clone(), id);
    id
}

/// Most DFA states kept in the process-wide automaton cache (about 100 bytes each).
const DFA_CACHE_STATES: usize = 1 << 20;

struct DfaCache {
    by_id: FxHashMap<u32, Arc<Dfa>>,
    states: usize,
}

fn dfa_cache() -> &'static Mutex<DfaCache> {
    static C: OnceLock<Mutex<DfaCache>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(DfaCache { by_id: FxHashMap::default(), states: 0 }))
}

/// The automaton of `rx` and its process-wide id. Automata are cached by id, so a terminal
/// shared by many grammars (JSON string contents, numbers, separators) is built once; the
/// cache is bounded by total states and cleared when full.
pub fn terminal_dfa(rx: &Rx, limits: &Limits) -> Result<(Arc<Dfa>, u32)> {
    let id = terminal_id(rx);
    let cached = dfa_cache().lock().unwrap_or_else(|p| p.into_inner()).by_id.get(&id).cloned();
    let dfa = match cached {
        Some(d) => d,
        None => {
            let d = Arc::new(Dfa::from_rx(rx, limits)?);
            let mut c = dfa_cache().lock().unwrap_or_else(|p| p.into_inner());
            if c.states + d.num_states() > DFA_CACHE_STATES {
                c.by_id.clear();
                c.states = 0;
            }
            c.states += d.num_states();
            c.by_id.insert(id, d.clone());
            d
        }
    };
    // A cached automaton may have been built under larger limits.
    if dfa.num_states() > limits.max_dfa_states {
        return Err(Error::Limit { name: "max_dfa_states", limit: limits.max_dfa_states, what: "a terminal's DFA has too many states".into(), hint: LIMIT_HINT });
    }
    Ok((dfa, id))
}
