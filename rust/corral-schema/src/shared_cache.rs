//! A process-wide map from inputs to built results, bounded by entry count (cleared when
//! full): automata of patterns, formats, character classes and key sets recur across schemas,
//! and building them again would cost milliseconds per compile.

use rustc_hash::FxBuildHasher;
use std::hash::{BuildHasher, Hash};
use std::sync::Mutex;

/// A bounded, thread-safe cache; results are cloned out (use `Arc` values).
///
/// Entries keep their key's hash: keys can be whole automata (thousands of transitions), and
/// a map that rehashed them each time it grew spent 5.6% of the slowest schemas' first
/// compiles doing so (session 19, perf over `compile_prof`); a lookup hashes its key once
/// for both the lookup and the insert after a miss.
pub(crate) struct SharedCache<K, V> {
    map: Mutex<Option<hashbrown::HashTable<(u64, K, V)>>>,
    max: usize,
}

impl<K: Hash + Eq, V: Clone> SharedCache<K, V> {
    /// An empty cache holding at most `max` entries.
    pub(crate) const fn new(max: usize) -> Self {
        SharedCache { map: Mutex::new(None), max }
    }

    /// The cached result for `key`, else `build()` (run without the lock held), cached.
    pub(crate) fn get_or_build(&self, key: K, build: impl FnOnce() -> V) -> V {
        let hash = FxBuildHasher.hash_one(&key);
        match self.get(hash, &key) {
            Some(v) => v,
            None => self.insert(hash, key, build()),
        }
    }

    /// [`SharedCache::get_or_build`] looked up by reference: the owned key (`owned()`) is
    /// made only on a miss.
    pub(crate) fn get_or_build_by<Q: Hash + Eq + ?Sized>(&self, key: &Q, owned: impl FnOnce() -> K, build: impl FnOnce() -> V) -> V
    where
        K: std::borrow::Borrow<Q>,
    {
        // (`Borrow` promises that `Q` hashes as `K` does.)
        let hash = FxBuildHasher.hash_one(key);
        match self.get(hash, key) {
            Some(v) => v,
            None => {
                let v = build();
                self.insert(hash, owned(), v)
            }
        }
    }

    /// The cached result for `key`, whose hash is `hash`.
    fn get<Q: Eq + ?Sized>(&self, hash: u64, key: &Q) -> Option<V>
    where
        K: std::borrow::Borrow<Q>,
    {
        let guard = self.map.lock().unwrap_or_else(|p| p.into_inner());
        guard.as_ref()?.find(hash, |e| e.0 == hash && e.1.borrow() == key).map(|e| e.2.clone())
    }

    /// Caches `v` under `key` (starting over when full) and returns it.
    fn insert(&self, hash: u64, key: K, v: V) -> V {
        let mut guard = self.map.lock().unwrap_or_else(|p| p.into_inner());
        let map = guard.get_or_insert_with(hashbrown::HashTable::new);
        if let Some(e) = map.find(hash, |e| e.0 == hash && e.1 == key) {
            // (Built meanwhile by another thread: the first stays, and every caller gets it.)
            return e.2.clone();
        }
        if map.len() >= self.max {
            map.clear();
        }
        map.insert_unique(hash, (hash, key, v.clone()), |e| e.0);
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn builds_once_and_stays_bounded() {
        let c: SharedCache<u32, u32> = SharedCache::new(2);
        let mut builds = 0;
        for k in [1, 1, 2, 1] {
            c.get_or_build(k, || {
                builds += 1;
                k * 10
            });
        }
        assert_eq!(builds, 2);
        assert_eq!(c.get_or_build(3, || 30), 30); // full: cleared, then 3 cached
        assert_eq!(c.get_or_build(1, || 11), 11, "1 was dropped by the clear and rebuilt");
    }
}
