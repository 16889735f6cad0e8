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

/// Most DFA states kept in the process-wide automaton cache (a few hundred bytes each: a
/// row of successors per byte class, live bytes, canonical states).
const DFA_CACHE_STATES: usize = 1 << 20;

struct DfaCache {
    /// Automata by terminal id, each with whether it was used since the last eviction.
    by_id: FxHashMap<u32, (Arc<Dfa>, bool)>,
    states: usize,
}

impl DfaCache {
    /// Makes room for `incoming` more states: when full, the automata not used since the
    /// last eviction go (second chance: the shared ones — string contents, separators, the
    /// leap-second pieces every `date-time` uses — stay, with their canonical states), and
    /// everything goes if that is not enough.
    fn make_room(&mut self, incoming: usize) {
        if self.states + incoming <= DFA_CACHE_STATES {
            return;
        }
        self.by_id.retain(|_, (_, used)| std::mem::replace(used, false));
        self.states = self.by_id.values().map(|(d, _)| d.num_states()).sum();
        if self.states + incoming > DFA_CACHE_STATES / 2 {
            self.by_id.clear();
            self.states = 0;
        }
    }
}

fn dfa_cache() -> &'static Mutex<DfaCache> {
    static C: OnceLock<Mutex<DfaCache>> = OnceLock::new();
    C.get_or_init(|| Mutex::new(DfaCache { by_id: FxHashMap::default(), states: 0 }))
}

/// The automaton of `rx` and its process-wide id. Automata are cached by id, so a terminal
/// shared by many grammars (JSON string contents, numbers, separators) is built once; the
/// cache is bounded by total states (see `DfaCache::make_room`).
pub fn terminal_dfa(rx: &Rx, limits: &Limits) -> Result<(Arc<Dfa>, u32)> {
    let id = terminal_id(rx);
    let cached = dfa_cache().lock().unwrap_or_else(|p| p.into_inner()).by_id.get_mut(&id).map(|(d, used)| {
        *used = true;
        d.clone()
    });
    let dfa = match cached {
        Some(d) => d,
        None => {
            let d = Arc::new(Dfa::from_rx(rx, limits)?);
            let mut c = dfa_cache().lock().unwrap_or_else(|p| p.into_inner());
            c.make_room(d.num_states());
            c.states += d.num_states();
            if let Some((old, _)) = c.by_id.insert(id, (d.clone(), false)) {
                c.states -= old.num_states(); // built twice at once by two threads
            }
            d
        }
    };
    // A cached automaton may have been built under larger limits.
    if dfa.num_states() > limits.max_dfa_states {
        return Err(Error::Limit { name: "max_dfa_states", limit: limits.max_dfa_states, what: "a terminal's DFA has too many states".into(), hint: LIMIT_HINT });
    }
    Ok((dfa, id))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_keeps_automata_used_since_the_last_one() {
        let dfa = |n: u8| Arc::new(Dfa::from_rx(&Rx::Literal(vec![b'a'; n as usize]), &Limits::default()).unwrap());
        let mut c = DfaCache { by_id: FxHashMap::default(), states: 0 };
        let (hot, cold) = (dfa(10), dfa(20));
        c.by_id.insert(1, (hot.clone(), true));
        c.by_id.insert(2, (cold.clone(), false));
        c.states = hot.num_states() + cold.num_states();
        c.make_room(100);
        assert_eq!(c.by_id.len(), 2, "not full: nothing goes");
        c.states = DFA_CACHE_STATES; // as if other automata had filled it (and left)
        c.make_room(100);
        assert!(c.by_id.contains_key(&1) && !c.by_id.contains_key(&2));
        assert_eq!(c.states, hot.num_states());
        assert!(!c.by_id[&1].1, "its second chance is used up");
        c.make_room(DFA_CACHE_STATES);
        assert!(c.by_id.is_empty() && c.states == 0, "no room even after evicting: everything goes");
    }
}
