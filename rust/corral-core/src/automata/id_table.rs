//! Bounded process-wide tables of ids: terminal ids by expression ([`crate::automata::intern`]) and
//! language ids by serialized automaton ([`crate::automata::fingerprint`]).
//!
//! Caches key their entries by these ids for the life of the process, so a table may forget
//! a key but must never give its id to another one: ids only grow. A key met again after it
//! was evicted gets a new id — its automaton and token sets are rebuilt, never confused.

use rustc_hash::FxHashMap;
use std::hash::Hash;

/// Ids are below this (the top bit marks language ids in the token-set cache keys).
pub(crate) const MAX_IDS: u32 = 1 << 31;

/// Second-chance eviction over a map whose entries are flagged when used: when `total +
/// incoming` exceeds `budget`, the entries not used since the last eviction go and the flags
/// of the rest are cleared; if what is left plus `incoming` still exceeds half the budget,
/// everything goes. `total` is the map's weight, recomputed with `weight`.
pub(crate) fn second_chance<K, V>(map: &mut FxHashMap<K, (V, bool)>, total: &mut usize, incoming: usize, budget: usize, weight: impl Fn(&K, &V) -> usize) {
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

/// Ids by key, within a budget of `weight(key)` units ([`second_chance`] eviction).
pub(crate) struct IdTable<K> {
    by_key: FxHashMap<K, (u32, bool)>,
    /// Weight of the keys held.
    total: usize,
    budget: usize,
    weight: fn(&K) -> usize,
    /// The next id to give.
    next: u32,
}

impl<K: Eq + Hash> IdTable<K> {
    /// An empty table holding keys of at most `budget` total `weight`.
    pub(crate) fn new(budget: usize, weight: fn(&K) -> usize) -> IdTable<K> {
        IdTable { by_key: FxHashMap::default(), total: 0, budget, weight, next: 0 }
    }

    /// The id of `key`, if it has one (marked used).
    pub(crate) fn get<Q>(&mut self, key: &Q) -> Option<u32>
    where
        K: std::borrow::Borrow<Q>,
        Q: Eq + Hash + ?Sized,
    {
        self.by_key.get_mut(key).map(|(id, used)| {
            *used = true;
            *id
        })
    }

    /// Records `key` with `id` (an id given by another table for the same thing).
    pub(crate) fn insert(&mut self, key: K, id: u32) {
        let size = (self.weight)(&key);
        let weight = self.weight;
        second_chance(&mut self.by_key, &mut self.total, size, self.budget, |k, _| weight(k));
        if self.by_key.insert(key, (id, false)).is_none() {
            self.total += size;
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
        self.insert(key, id);
        Some(id)
    }

    /// Keys held (tests only).
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.by_key.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eviction_never_reuses_ids() {
        let mut t: IdTable<Vec<u8>> = IdTable::new(100, |k| k.len());
        assert_eq!((t.intern(vec![1]), t.intern(vec![2, 2]), t.intern(vec![1])), (Some(0), Some(1), Some(0)), "equal keys share an id");
        // Full (as if other keys had filled it): [1], used since the last eviction, keeps its
        // id; [2, 2] goes, and gets a fresh id when met again.
        t.total = 100;
        assert_eq!(t.intern(vec![3]), Some(2));
        assert_eq!(t.get(&[1u8][..]), Some(0));
        assert_eq!(t.intern(vec![2, 2]), Some(3), "an evicted key gets a new id, never an old one");
        // No room even after the second chance: everything goes, ids still grow.
        t.total = 100;
        assert_eq!(t.intern(vec![9; 60]), Some(4));
        assert_eq!(t.len(), 1, "everything else went");
        assert_eq!(t.intern(vec![1]), Some(5));
        t.next = MAX_IDS;
        assert_eq!(t.intern(vec![7]), None, "no id once they ran out");
        t.insert(vec![8], 3);
        assert_eq!(t.get(&[8u8][..]), Some(3), "insert records another table's id");
    }
}
