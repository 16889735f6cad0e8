//! Process-wide ids for terminal languages, so caches keyed by (terminal, DFA state) are
//! shared by every grammar that contains the same terminal (e.g. JSON string contents).

use crate::automata::dfa::Dfa;
use crate::runtime::error::{Error, Result};
use crate::automata::id_table::{second_chance, IdTable, MAX_IDS};
use crate::runtime::limits::{Limits, LIMIT_HINT};
use crate::frontend::rx::Rx;
use rustc_hash::FxHashMap;
use std::sync::{Arc, Mutex, OnceLock};

/// Approximate bytes of expressions the id table may hold (`Rx::heap_bytes`): schema
/// compilers put whole JSON-encoded automata in terminals, and a server compiling many
/// distinct schemas must not keep every one it ever saw.
const ID_TABLE_BYTES: usize = 64 << 20;

fn table() -> &'static Mutex<IdTable<Rx>> {
    static T: OnceLock<Mutex<IdTable<Rx>>> = OnceLock::new();
    T.get_or_init(|| Mutex::new(IdTable::new(ID_TABLE_BYTES, Rx::heap_bytes)))
}

/// The process-wide id of the language of `rx` (structurally equal expressions share an id
/// while it is in the bounded table, [`crate::automata::id_table`]; DFA construction is deterministic,
/// so equal ids mean identical automata and state numbers). Ids are never reused; running out
/// of them is a limit error.
pub(crate) fn terminal_id(rx: &Rx) -> Result<u32> {
    let mut t = table().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(id) = t.get(rx) {
        return Ok(id);
    }
    t.intern_new(rx.clone()).ok_or_else(|| Error::Limit {
        name: "process_terminal_ids",
        limit: MAX_IDS as usize,
        what: "this process has given ids to 2^31 distinct terminals".into(),
        hint: "restart the process (ids are never reused, so the caches keyed by them stay exact)",
    })
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

/// The cached automaton of terminal `id`, marked used.
fn cached(id: u32) -> Option<Arc<Dfa>> {
    dfa_cache().lock().unwrap_or_else(|p| p.into_inner()).by_id.get_mut(&id).map(|(d, used)| {
        *used = true;
        d.clone()
    })
}

/// [`cached`], as a limit error when it has more states than `limits` allow (it may have been
/// built under larger ones).
pub(crate) fn cached_within(id: u32, limits: &Limits) -> Result<Option<Arc<Dfa>>> {
    match cached(id) {
        Some(d) => check_size(&d, limits).map(|()| Some(d)),
        None => Ok(None),
    }
}

/// Caches the automaton `d` of terminal `id`.
fn insert(id: u32, d: &Arc<Dfa>) {
    let mut c = dfa_cache().lock().unwrap_or_else(|p| p.into_inner());
    c.make_room(d.num_states());
    c.states += d.num_states();
    if let Some((old, _)) = c.by_id.insert(id, (d.clone(), false)) {
        c.states -= old.num_states(); // built twice at once by two threads
    }
}

/// Builds the automaton of terminal `id` (expression `rx`) and caches it.
pub(crate) fn build(rx: &Rx, id: u32, limits: &Limits) -> Result<Arc<Dfa>> {
    let d = Arc::new(Dfa::from_rx(rx, limits)?);
    insert(id, &d);
    check_size(&d, limits)?;
    Ok(d)
}

/// Builds the deferred automaton of terminal `gid` (expression `rx`), or takes it from the
/// cache, and caches it. Does not fail: [`crate::automata::det_concat::deferrable`] admitted `rx` only
/// if its direct construction succeeds within the limit it was given, and the build here
/// runs without limits. (Were it to fail anyway, it panics — an internal error at the
/// Python boundary — rather than give a wrong mask.)
pub(crate) fn build_deferred(rx: &Rx, gid: u32) -> Arc<Dfa> {
    if let Some(d) = cached(gid) {
        return d;
    }
    let unlimited = Limits { max_dfa_states: usize::MAX / 4, max_nfa_states: usize::MAX / 4, max_repeat: u32::MAX, ..Limits::default() };
    let d = Arc::new(Dfa::from_rx(rx, &unlimited).unwrap_or_else(|e| panic!("a deferred terminal's automaton did not build: {e}")));
    insert(gid, &d);
    d
}

/// A limit error when `d` has more states than `limits` allow.
fn check_size(d: &Dfa, limits: &Limits) -> Result<()> {
    if d.num_states() > limits.max_dfa_states {
        return Err(Error::Limit { name: "max_dfa_states", limit: limits.max_dfa_states, what: "a terminal's DFA has too many states".into(), hint: LIMIT_HINT });
    }
    Ok(())
}

/// The automaton of `rx` and its process-wide id. Automata are cached by id, so a terminal
/// shared by many grammars (JSON string contents, numbers, separators) is built once; the
/// cache is bounded by total states (see `DfaCache::make_room`).
pub fn terminal_dfa(rx: &Rx, limits: &Limits) -> Result<(Arc<Dfa>, u32)> {
    let id = terminal_id(rx)?;
    let dfa = match cached_within(id, limits)? {
        Some(d) => d,
        None => build(rx, id, limits)?,
    };
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
