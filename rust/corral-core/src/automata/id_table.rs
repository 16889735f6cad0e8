//! Process-wide tables of ids, under the memory budget: terminal ids by expression ([`crate::automata::intern`]) and
//! language ids by serialized automaton ([`crate::automata::fingerprint`]).
//!
//! Caches key their entries by these ids for the life of the process, so a table may forget
//! a key but must never give its id to another one: ids only grow. A key met again after it
//! was evicted gets a new id — its automaton and token sets are rebuilt, never confused.

use crate::runtime::memory::{self, Account, Kind, Victim};
use rustc_hash::{FxHashMap, FxHashSet};
use std::hash::Hash;
use std::sync::{Arc, Mutex, Weak};

/// Ids are below this (the top bit marks language ids in the token-set cache keys).
pub(crate) const MAX_IDS: u32 = 1 << 31;

/// Ids by key, under the process's memory budget ([`crate::runtime::memory`]): each key is
/// charged `weight(key)` bytes when recorded and stamped when used; a key the budget refuses
/// is not recorded (its id is still given, so it is met again as new).
pub(crate) struct IdTable<K> {
    by_key: FxHashMap<K, (u32, u64)>,
    account: Arc<Account>,
    weight: fn(&K) -> usize,
    /// The next id to give.
    next: u32,
    kind: Kind,
}

impl<K: Eq + Hash> IdTable<K> {
    /// An empty table of `kind`, weighing its keys by `weight`.
    pub(crate) fn new(kind: Kind, weight: fn(&K) -> usize) -> IdTable<K> {
        IdTable { by_key: FxHashMap::default(), account: Arc::new(Account::new(kind)), weight, next: 0, kind }
    }

    /// The id of `key`, if it has one (stamped used).
    pub(crate) fn get<Q>(&mut self, key: &Q) -> Option<u32>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        match self.by_key.get_mut(key) {
            Some((id, stamp)) => {
                *stamp = memory::now();
                self.account.hit();
                Some(*id)
            }
            None => {
                self.account.miss();
                None
            }
        }
    }

    /// Records `key` with `id` (an id given by another table for the same thing), within
    /// the budget.
    pub(crate) fn insert(&mut self, key: K, id: u32) {
        let size = (self.weight)(&key);
        if !self.account.try_charge(size) {
            return;
        }
        if self.by_key.insert(key, (id, memory::now())).is_some() {
            self.account.refund(size, false);
        }
    }

    /// The id of `key`, a new one when it has none; `None` once [`MAX_IDS`] were given.
    pub(crate) fn intern(&mut self, key: K) -> Option<u32> {
        if let Some(id) = self.get(&key) {
            return Some(id);
        }
        self.intern_new(key)
    }

    /// A new id for `key`, which the caller just found has none ([`IdTable::get`]); `None`
    /// once [`MAX_IDS`] were given.
    pub(crate) fn intern_new(&mut self, key: K) -> Option<u32> {
        if self.next >= MAX_IDS {
            return None;
        }
        let id = self.next;
        self.next += 1;
        if crate::runtime::miss_diag::enabled() {
            let space = if self.kind == Kind::LanguageIds { crate::runtime::miss_diag::Space::Language } else { crate::runtime::miss_diag::Space::Terminal };
            crate::runtime::miss_diag::id_given(space, &key, id);
        }
        self.insert(key, id);
        Some(id)
    }

    /// Keys held (tests only).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_key.len()
    }
}

/// A process-wide [`IdTable`] behind a lock, registered with the memory budget.
pub(crate) struct SharedTable<K> {
    pub(crate) table: Mutex<IdTable<K>>,
    account: Arc<Account>,
}

impl<K: Eq + Hash + Send + Sync + 'static> SharedTable<K> {
    /// A registered table (see [`IdTable::new`]).
    pub(crate) fn new(kind: Kind, weight: fn(&K) -> usize) -> Arc<SharedTable<K>> {
        let table = IdTable::new(kind, weight);
        let account = table.account.clone();
        let t = Arc::new(SharedTable { table: Mutex::new(table), account });
        let weak: Weak<dyn memory::Cache> = Arc::downgrade(&t) as Weak<SharedTable<K>>;
        memory::register(weak);
        t
    }
}

impl<K: Eq + Hash + Send + Sync + 'static> memory::Cache for SharedTable<K> {
    fn account(&self) -> &Account {
        &self.account
    }

    fn victims(&self, out: &mut Vec<Victim>) {
        let t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        out.extend(t.by_key.iter().map(|(k, &(id, stamp))| {
            let bytes = (t.weight)(k);
            Victim { priority: memory::priority(stamp, 0, bytes), bytes, handle: id as u64 }
        }));
    }

    fn evict(&self, handles: &[u64]) {
        let set: FxHashSet<u64> = handles.iter().copied().collect();
        let mut t = self.table.lock().unwrap_or_else(|p| p.into_inner());
        let weight = t.weight;
        let mut freed = Vec::new();
        t.by_key.retain(|k, (id, _)| {
            let keep = !set.contains(&(*id as u64));
            if !keep {
                freed.push(weight(k));
            }
            keep
        });
        for b in freed {
            t.account.refund(b, true);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::memory::Cache;

    #[test]
    fn eviction_never_reuses_ids() {
        let shared: Arc<SharedTable<Vec<u8>>> = SharedTable::new(Kind::TerminalIds, |k| k.len());
        let mut t = shared.table.lock().unwrap();
        assert_eq!((t.intern(vec![1]), t.intern(vec![2, 2]), t.intern(vec![1])), (Some(0), Some(1), Some(0)), "equal keys share an id");
        drop(t);
        shared.evict(&[1]);
        let mut t = shared.table.lock().unwrap();
        assert_eq!(t.get(&[1u8][..]), Some(0), "not evicted: keeps its id");
        assert_eq!(t.intern(vec![2, 2]), Some(2), "an evicted key gets a new id, never an old one");
        assert_eq!(t.len(), 2);
        t.next = MAX_IDS;
        assert_eq!(t.intern(vec![7]), None, "no id once they ran out");
        t.insert(vec![8], 3);
        assert_eq!(t.get(&[8u8][..]), Some(3), "insert records another table's id");
    }
}
