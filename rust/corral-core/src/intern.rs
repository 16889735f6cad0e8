//! Process-wide ids for terminal languages, so caches keyed by (terminal, DFA state) are
//! shared by every grammar that contains the same terminal (e.g. JSON string contents).

use crate::dfa::Dfa;
use crate::error::{Error, Result};
use crate::limits::{Limits, LIMIT_HINT};
use crate::rx::Rx;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Second-chance eviction for the tables here (entries flagged when used): when `total +
/// incoming` exceeds `budget`, the entries not used since the last eviction go and the flags
/// of the rest are cleared; if what is left plus `incoming` still exceeds half the budget,
/// everything goes. `total` is the tables' weight, recomputed with `weight`.
fn second_chance<K, V>(map: &mut FxHashMap<K, (V, bool)>, total: &mut usize, incoming: usize, budget: usize, weight: impl Fn(&K, &V) -> usize) {
    if *total + incoming <= budget {
        return;
    }
    map.retain(|_, (_, used)| std::mem::replace(used, false));
    *total = map.iter().map(|(k, (v, _))| weight(k, v)).sum();
    if *total + incoming > budget / 2 {
        map.clear();
        *total = 0;
    }
}

/// Approximate bytes of expressions the id table may hold (`Rx::heap_bytes`): schema
/// compilers put whole JSON-encoded automata in terminals, and a server compiling many
/// distinct schemas must not keep every one it ever saw.
const ID_TABLE_BYTES: usize = 64 << 20;

/// Ids are below this (the top bit marks language ids in the token-set cache keys).
const MAX_IDS: u32 = 1 << 31;

/// Terminal ids by expression, each with whether it was used since the last eviction.
struct IdTable {
    by_rx: FxHashMap<Rx, (u32, bool)>,
    /// Approximate bytes held by the keys.
    bytes: usize,
    /// The next id: ids only grow, so an id is never given to a second expression and the
    /// caches keyed by ids (automata, token sets) stay exact across evictions.
    next: u32,
}

impl IdTable {
    /// Makes room for `incoming` more bytes: when full, the expressions not used since the
    /// last eviction go (second chance), and everything goes if that is not enough. An
    /// evicted expression met again gets a new id (its automaton and token sets are rebuilt).
    fn make_room(&mut self, incoming: usize) {
        second_chance(&mut self.by_rx, &mut self.bytes, incoming, ID_TABLE_BYTES, |rx, _| rx.heap_bytes());
    }

    fn id(&mut self, rx: &Rx) -> Result<u32> {
        if let Some((id, used)) = self.by_rx.get_mut(rx) {
            *used = true;
            return Ok(*id);
        }
        if self.next >= MAX_IDS {
            return Err(Error::Limit {
                name: "process_terminal_ids",
                limit: MAX_IDS as usize,
                what: "this process has given ids to 2^31 distinct terminals".into(),
                hint: "restart the process (ids are never reused, so the caches keyed by them stay exact)",
            });
        }
        let size = rx.heap_bytes();
        self.make_room(size);
        let id = self.next;
        self.next += 1;
        self.by_rx.insert(rx.clone(), (id, false));
        self.bytes += size;
        Ok(id)
    }
}

fn table() -> &'static Mutex<IdTable> {
    static T: OnceLock<Mutex<IdTable>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(IdTable { by_rx: FxHashMap::default(), bytes: 0, next: 0 }))
}

/// The process-wide id of the language of `rx` (structurally equal expressions share an id
/// while it is in the table; DFA construction is deterministic, so equal ids mean identical
/// automata and state numbers). The table is bounded (`IdTable::make_room`); ids are never
/// reused.
pub fn terminal_id(rx: &Rx) -> Result<u32> {
    table().lock().unwrap_or_else(|p| p.into_inner()).id(rx)
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
        second_chance(&mut self.by_id, &mut self.states, incoming, DFA_CACHE_STATES, |_, d| d.num_states());
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
    let id = terminal_id(rx)?;
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
    fn id_table_eviction_never_reuses_ids() {
        let lit = |n: usize| Rx::Literal(vec![b'a'; n]);
        let mut t = IdTable { by_rx: FxHashMap::default(), bytes: 0, next: 0 };
        let (a, b) = (t.id(&lit(1)).unwrap(), t.id(&lit(2)).unwrap());
        assert_eq!((a, b, t.id(&lit(1)).unwrap()), (0, 1, 0), "equal expressions share an id");
        // Full (as if other expressions had filled it): lit(1), used since, keeps its id;
        // lit(2) goes, and gets a fresh id when met again.
        t.bytes = ID_TABLE_BYTES;
        let c = t.id(&lit(3)).unwrap();
        assert_eq!(c, 2);
        assert_eq!(t.id(&lit(1)).unwrap(), 0);
        assert_eq!(t.id(&lit(2)).unwrap(), 3, "an evicted expression gets a new id, never an old one");
        // No room even after the second chance: everything goes, ids still grow.
        t.bytes = ID_TABLE_BYTES;
        t.make_room(ID_TABLE_BYTES);
        assert!(t.by_rx.is_empty());
        assert_eq!(t.id(&lit(1)).unwrap(), 4);
        t.next = MAX_IDS;
        assert!(matches!(t.id(&lit(9)), Err(Error::Limit { name: "process_terminal_ids", .. })));
    }

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
