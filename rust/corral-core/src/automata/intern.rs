//! Process-wide ids for terminal languages, so caches keyed by (terminal, DFA state) are
//! shared by every grammar that contains the same terminal (e.g. JSON string contents).

use crate::automata::dfa::Dfa;
use crate::automata::id_table::{IdTable, SharedTable, MAX_IDS};
use crate::frontend::rx::Rx;
use crate::runtime::error::{Error, Result};
use crate::runtime::limits::{Limits, LIMIT_HINT};
use crate::runtime::memory::{self, Account, Kind, Victim};
use rustc_hash::{FxHashMap, FxHashSet};
use std::sync::{Arc, Mutex, OnceLock, Weak};

/// Terminal ids by expression, under the memory budget: schema compilers put whole
/// JSON-encoded automata in terminals, and a server compiling many distinct schemas must not
/// keep every one it ever saw.
fn table() -> &'static Mutex<IdTable<Rx>> {
    static T: OnceLock<Arc<SharedTable<Rx>>> = OnceLock::new();
    &T.get_or_init(|| SharedTable::new(Kind::TerminalIds, Rx::heap_bytes)).table
}

/// The process-wide id of the language of `rx` (structurally equal expressions share an id
/// while it is in the table, [`crate::automata::id_table`]; DFA construction is deterministic,
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

/// A cached automaton: the bytes charged, when it was last used, what it took to build.
struct Slot {
    dfa: Arc<Dfa>,
    bytes: usize,
    stamp: u64,
    cost_ns: u64,
}

/// The process-wide automata by terminal id, under the memory budget. An automaton a
/// compiled grammar holds is in use: never evicted (evicting it would free nothing).
struct DfaCache {
    by_id: Mutex<FxHashMap<u32, Slot>>,
    account: Account,
}

impl memory::Cache for DfaCache {
    fn account(&self) -> &Account {
        &self.account
    }

    fn victims(&self, out: &mut Vec<Victim>) {
        let map = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
        out.extend(map.iter().filter(|(_, s)| Arc::strong_count(&s.dfa) == 1).map(|(&id, s)| Victim { priority: memory::priority(s.stamp, s.cost_ns, s.bytes), bytes: s.bytes, handle: id as u64 }));
    }

    fn evict(&self, handles: &[u64]) {
        let set: FxHashSet<u64> = handles.iter().copied().collect();
        let mut gone = Vec::new();
        {
            let mut map = self.by_id.lock().unwrap_or_else(|p| p.into_inner());
            let ids: Vec<u32> = map.iter().filter(|(&id, s)| set.contains(&(id as u64)) && Arc::strong_count(&s.dfa) == 1).map(|(&id, _)| id).collect();
            gone.extend(ids.iter().filter_map(|id| map.remove(id)));
        }
        for s in &gone {
            self.account.refund(s.bytes, true);
        }
    }

    fn pinned(&self) -> usize {
        self.by_id.lock().unwrap_or_else(|p| p.into_inner()).values().filter(|s| Arc::strong_count(&s.dfa) > 1).map(|s| s.bytes).sum()
    }
}

fn dfa_cache() -> &'static DfaCache {
    static C: OnceLock<Arc<DfaCache>> = OnceLock::new();
    C.get_or_init(|| {
        let c = Arc::new(DfaCache { by_id: Mutex::new(FxHashMap::default()), account: Account::new(Kind::Automata) });
        let weak: Weak<dyn memory::Cache> = Arc::downgrade(&c) as Weak<DfaCache>;
        memory::register(weak);
        c
    })
}

/// The cached automaton of terminal `id`, stamped used.
fn cached(id: u32) -> Option<Arc<Dfa>> {
    let c = dfa_cache();
    let hit = c.by_id.lock().unwrap_or_else(|p| p.into_inner()).get_mut(&id).map(|s| {
        s.stamp = memory::now();
        s.dfa.clone()
    });
    match &hit {
        Some(_) => c.account.hit(),
        None => c.account.miss(),
    }
    hit
}

/// [`cached`], as a limit error when it has more states than `limits` allow (it may have been
/// built under larger ones).
pub(crate) fn cached_within(id: u32, limits: &Limits) -> Result<Option<Arc<Dfa>>> {
    match cached(id) {
        Some(d) => check_size(&d, limits).map(|()| Some(d)),
        None => Ok(None),
    }
}

/// Caches the automaton `d` of terminal `id`, which took `cost_ns` to build.
fn insert(id: u32, d: &Arc<Dfa>, cost_ns: u64) {
    let c = dfa_cache();
    // (Always kept: the grammar being compiled holds it, so it costs its memory either way,
    // and counted, it makes the budget evict something else instead.)
    let bytes = d.memory_bytes();
    c.account.charge_in_use(bytes);
    let old = c.by_id.lock().unwrap_or_else(|p| p.into_inner()).insert(id, Slot { dfa: d.clone(), bytes, stamp: memory::now(), cost_ns });
    if let Some(old) = old {
        c.account.refund(old.bytes, false); // built twice at once by two threads
    }
}

/// Builds the automaton of terminal `id` (expression `rx`) and caches it.
pub(crate) fn build(rx: &Rx, id: u32, limits: &Limits) -> Result<Arc<Dfa>> {
    let t0 = std::time::Instant::now();
    let d = Arc::new(Dfa::from_rx(rx, limits)?);
    insert(id, &d, t0.elapsed().as_nanos() as u64);
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
    let t0 = std::time::Instant::now();
    let d = Arc::new(Dfa::from_rx(rx, &unlimited).unwrap_or_else(|e| panic!("a deferred terminal's automaton did not build: {e}")));
    insert(gid, &d, t0.elapsed().as_nanos() as u64);
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
    use crate::runtime::memory::Cache;

    /// An automaton a grammar holds is never a victim; once released it is, and goes.
    #[test]
    fn automata_in_use_are_not_evicted() {
        let rx = Rx::Literal(b"automata_in_use_are_not_evicted".to_vec());
        let (d, id) = terminal_dfa(&rx, &Limits::default()).unwrap();
        let c = dfa_cache();
        let victim = |c: &DfaCache| {
            let mut v = Vec::new();
            c.victims(&mut v);
            v.iter().any(|v| v.handle == id as u64)
        };
        assert!(!victim(c), "held here: in use");
        c.evict(&[id as u64]);
        assert!(cached(id).is_some(), "evicting an automaton in use does nothing");
        drop(d);
        assert!(victim(c));
        c.evict(&[id as u64]);
        assert!(cached(id).is_none());
    }
}
